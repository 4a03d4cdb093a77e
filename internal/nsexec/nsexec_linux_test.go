package nsexec

import (
	"net"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/nodenet/nodenet/internal/testroot"
)

func TestDoRunsInTheNamespaceAndComesBack(t *testing.T) {
	testroot.Require(t, "a new network namespace")
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	target, err := netns.NewNamed("nn-nsexec-test")
	if err != nil {
		t.Fatal(err)
	}
	// NewNamed moved this thread into target; move it back first.
	if err := netns.Set(orig); err != nil {
		t.Fatal(err)
	}
	defer func() { target.Close(); _ = netns.DeleteNamed("nn-nsexec-test") }()

	var inside int
	err = Do(target, func() error {
		ifs, err := net.Interfaces()
		inside = len(ifs)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if inside != 1 {
		t.Errorf("fn saw %d interfaces, want only the new namespace's lo", inside)
	}
	if err := Do(target, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	here, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer here.Close()
	if !here.Equal(orig) {
		t.Error("the calling thread ended up in another namespace")
	}
}

func TestNewLeavesTheCallerWhereItWas(t *testing.T) {
	testroot.Require(t, "creating a network namespace")
	before, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	ns, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if ns.Equal(before) {
		t.Fatal("New returned the caller's own namespace")
	}
	var inside netns.NsHandle
	if err := Do(ns, func() (err error) { inside, err = netns.Get(); return err }); err != nil {
		t.Fatal(err)
	}
	defer inside.Close()
	if !inside.Equal(ns) {
		t.Error("Do(New()) did not run in the new namespace")
	}
	after, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	if !after.Equal(before) {
		t.Error("New moved the calling thread")
	}
}
