//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os/exec"
	"sort"
)

// rulesetCheck is what a proxy left in its namespace's nftables: object
// counts, the largest sets and maps, and which expected IPs are missing.
// It knows no proxy's rule shape: every IP must appear somewhere.
type rulesetCheck struct {
	Tables   int            `json:"tables"`
	Chains   int            `json:"chains"`
	Rules    int            `json:"rules"`
	Sets     int            `json:"sets"`
	Maps     int            `json:"maps"`
	Elements int            `json:"elements"`
	Largest  map[string]int `json:"largestSetsAndMaps"`
	// Missing counts expected ClusterIPs / endpoint IPs absent from the
	// ruleset; both must be zero.
	MissingClusterIPs  int    `json:"missingClusterIPs"`
	MissingEndpointIPs int    `json:"missingEndpointIPs"`
	FirstMissing       string `json:"firstMissing,omitempty"`
}

func (r rulesetCheck) ok() bool { return r.MissingClusterIPs == 0 && r.MissingEndpointIPs == 0 }

// checkRuleset lists the namespace's ruleset as JSON and counts it.
func checkRuleset(ctx context.Context, n *node, nft string, clusterIPs, endpointIPs []netip.Addr) (rulesetCheck, error) {
	argv := n.command(nft, "-j", "list", "ruleset")
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return rulesetCheck{}, fmt.Errorf("nft list ruleset: %w: %s", err, stderr.String())
	}
	var doc struct {
		Nftables []map[string]json.RawMessage `json:"nftables"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return rulesetCheck{}, fmt.Errorf("parse nft json: %w", err)
	}
	var r rulesetCheck
	seen := map[netip.Addr]bool{}
	sizes := map[string]int{}
	for _, obj := range doc.Nftables {
		for kind, raw := range obj {
			switch kind {
			case "table":
				r.Tables++
			case "chain":
				r.Chains++
			case "rule":
				r.Rules++
			case "set", "map":
				var s struct {
					Family, Table, Name string
					Elem                []json.RawMessage
				}
				if err := json.Unmarshal(raw, &s); err != nil {
					return r, fmt.Errorf("parse %s: %w", kind, err)
				}
				if kind == "set" {
					r.Sets++
				} else {
					r.Maps++
				}
				r.Elements += len(s.Elem)
				sizes[fmt.Sprintf("%s %s %s %s", kind, s.Family, s.Table, s.Name)] = len(s.Elem)
			}
			if err := collectIPs(raw, seen); err != nil {
				return r, err
			}
		}
	}
	r.Largest = largest(sizes, 8)
	for _, a := range clusterIPs {
		if !seen[a] {
			r.MissingClusterIPs++
			r.FirstMissing = cmpOr(r.FirstMissing, "clusterIP "+a.String())
		}
	}
	for _, a := range endpointIPs {
		if !seen[a] {
			r.MissingEndpointIPs++
			r.FirstMissing = cmpOr(r.FirstMissing, "endpoint "+a.String())
		}
	}
	return r, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// collectIPs adds every string in the JSON value that is an IP address
// (nft prints addresses as strings, alone or inside concatenations,
// prefixes and ranges).
func collectIPs(raw json.RawMessage, seen map[netip.Addr]bool) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		tok, err := dec.Token()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("walk nft json: %w", err)
		}
		if s, ok := tok.(string); ok && len(s) >= 7 && len(s) <= 15 {
			if a, err := netip.ParseAddr(s); err == nil {
				seen[a] = true
			}
		}
	}
}

// largest keeps the n biggest entries.
func largest(sizes map[string]int, n int) map[string]int {
	names := make([]string, 0, len(sizes))
	for name := range sizes {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		if sizes[names[i]] != sizes[names[j]] {
			return sizes[names[i]] > sizes[names[j]]
		}
		return names[i] < names[j]
	})
	out := map[string]int{}
	for _, name := range names[:min(n, len(names))] {
		out[name] = sizes[name]
	}
	return out
}
