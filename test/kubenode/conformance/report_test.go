package main

import (
	"regexp"
	"strings"
	"testing"
)

const sampleJUnit = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="4" disabled="0" errors="0" failures="1" time="10">
  <testsuite name="Kubernetes e2e suite" package="/" tests="4">
    <testcase name="[It] [sig-network] Services should serve a basic endpoint from pods  [Conformance]" classname="Kubernetes e2e suite" status="passed" time="12.5"></testcase>
    <testcase name="[sig-network] DNS should provide DNS for services  [Conformance]" classname="Kubernetes e2e suite" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
    <testcase name="[sig-network] Services should be able to change the type from ExternalName to NodePort [Conformance]" classname="Kubernetes e2e suite" status="failed" time="30"><failure message="" type="failed">[FAILED] timed out&#xA;In [It] at: service.go:1</failure></testcase>
    <testcase name="[sig-storage] ConfigMap should be consumable [Conformance]" classname="Kubernetes e2e suite" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
  </testsuite>
</testsuites>`

func TestParseJUnit(t *testing.T) {
	focus := regexp.MustCompile(`\[sig-network\].*\[Conformance\]`)
	skips := []Skip{{Pattern: `\[sig-network\] DNS`, Reason: "no CoreDNS"}}
	rs, err := parseJUnit(strings.NewReader(sampleJUnit), focus, skips)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{
		"[sig-network] DNS should provide DNS for services  [Conformance]":                                     {"skipped", "no CoreDNS"},
		"[sig-network] Services should be able to change the type from ExternalName to NodePort [Conformance]": {"failed", "timed out"},
		"[sig-network] Services should serve a basic endpoint from pods  [Conformance]":                        {"passed", ""},
	}
	if len(rs) != len(want) {
		t.Fatalf("got %d results, want %d (specs outside the focus dropped): %+v", len(rs), len(want), rs)
	}
	for _, r := range rs {
		w, ok := want[r.Name]
		if !ok || r.Status != w[0] || r.Reason != w[1] {
			t.Errorf("%q: got %s %q, want %v", r.Name, r.Status, r.Reason, w)
		}
	}
	p, f, s := Counts(rs)
	if p != 1 || f != 1 || s != 1 {
		t.Errorf("counts %d/%d/%d, want 1/1/1", p, f, s)
	}
	md := Report{Results: rs, Skips: skips, Nodes: 1}.Markdown()
	if !strings.Contains(md, "**1 of 3 `[sig-network]` conformance specs passed, 1 failed, 1 skipped**") {
		t.Errorf("summary line missing:\n%s", md)
	}
}
