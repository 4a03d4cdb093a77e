package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The runtime starts this binary for every pod, so its start time is part
// of every ADD: package init of the Kubernetes libraries alone doubled it
// once. Keep the heavy parts on the agent's side of the socket.
func TestPluginLinksNothingHeavy(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	forbidden := []string{"k8s.io/", "github.com/nodenet/nodenet/hns", "github.com/nodenet/nodenet/ipam",
		"github.com/nodenet/nodenet/agent", "github.com/prometheus/", "github.com/Microsoft/hnslib"}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f) {
				t.Errorf("nodenet-cni links %s", dep)
			}
		}
	}
}
