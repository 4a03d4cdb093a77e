package proxier_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	"github.com/nodenet/nodenet/proxy"
	"github.com/nodenet/nodenet/proxy/brain"
	"github.com/nodenet/nodenet/proxy/proxier"
	"github.com/nodenet/nodenet/proxy/source"
)

// TestBadInputIsSkippedWithoutPoisoningTheSync feeds the proxier, through
// the files source, Services and EndpointSlices no apiserver would admit
// next to a good one: the good service and the good parts of the
// half-bad one are programmed, each bad piece is reported by an event,
// and nothing crashes.
func TestBadInputIsSkippedWithoutPoisoningTheSync(t *testing.T) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2)))
	backend, fake := newBackend(t, logger)
	recorder := record.NewFakeRecorder(100)
	p, err := proxier.New(proxier.Options{
		Source:     source.NewFiles(source.FilesOptions{Dir: "testdata/badinput", NodeName: nodeName, Logger: logger}),
		Backend:    backend,
		Brain:      brain.Options{NodeName: nodeName, Families: []proxy.IPFamily{proxy.IPv4}, Recorder: recorder, Logger: logger},
		SyncPeriod: time.Hour,
		Logger:     logger,
	})
	if err != nil {
		t.Fatalf("proxier: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("proxier run: %v", err)
		}
	}()
	deadline := time.Now().Add(follow)
	for p.Syncs() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no sync after %v", follow)
		}
		time.Sleep(10 * time.Millisecond)
	}

	state := p.State()
	byName := map[string]*proxy.ServicePort{}
	for key, sp := range state.ServicePorts {
		byName[key.Name] = sp
	}
	good := byName["good"]
	if good == nil || len(good.InternalEndpoints) != 1 || good.InternalEndpoints[0].String() != "10.244.1.10:8080" {
		t.Errorf("good service: got %+v, want one endpoint 10.244.1.10:8080 (the duplicate merged, the bad address skipped)", good)
	}
	halfBad := byName["half-bad"]
	if halfBad == nil || len(halfBad.ExternalIPs) != 1 || halfBad.ExternalIPs[0] != netip.MustParseAddr("192.0.2.10") {
		t.Errorf("half-bad service: got %+v, want it programmed with its one valid external IP", halfBad)
	}
	for _, name := range []string{"bad-cluster-ip", "bad-protocol", "no-port"} {
		if byName[name] != nil {
			t.Errorf("%s was programmed: %+v", name, byName[name])
		}
	}
	dump := fake.Dump()
	for _, want := range []string{"10.96.0.20 . tcp . 80", "10.244.1.10 . 8080", "192.0.2.10 . tcp . 80"} {
		if !strings.Contains(dump, want) {
			t.Errorf("the table lacks %q:\n%s", want, dump)
		}
	}

	// One warning per bad object, naming what was wrong.
	var events []string
	for len(recorder.Events) > 0 {
		events = append(events, <-recorder.Events)
	}
	for _, want := range []string{"10.96.0.999", "QUIC", "192.0.2.300", "not-an-ip", "listed twice", "service-name label", "port 0"} {
		found := false
		for _, e := range events {
			found = found || strings.Contains(e, want)
		}
		if !found {
			t.Errorf("no event mentions %q; events:\n%s", want, strings.Join(events, "\n"))
		}
	}
	for _, e := range events {
		if !strings.HasPrefix(e, "Warning ") {
			t.Errorf("event %q is not a warning", e)
		}
	}
}
