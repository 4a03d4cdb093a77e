package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/nodenet/nodenet/agent/status"
)

const dumpUsage = `Usage: nodenetctl dump [hns|nft] [flags]

  Print what the agent's dataplane holds, readable: HNS networks,
  endpoints and load balancers (like hnsdiag) for "hns", the nftables
  table for "nft". Without an argument, whichever this agent runs; naming
  the other one is an error.

Flags:
`

// dumpDataplanes maps dump's argument to the --dataplane values whose
// dump it names (sim is the HNS simulator).
var dumpDataplanes = map[string][]string{
	"hns": {"hns", "sim"},
	"nft": {"linux"},
}

// dumpNames are the dataplanes' state, as errors name it.
var dumpNames = map[string]string{"hns": "HNS", "nft": "nftables"}

// dumpKind is dump's argument for an agent's dataplane.
func dumpKind(dataplane string) string {
	for kind, dataplanes := range dumpDataplanes {
		if slices.Contains(dataplanes, dataplane) {
			return kind
		}
	}
	return dataplane
}

func (c *ctl) dump(args []string) int {
	var f agentFlags
	fs := c.flagSet("dump", dumpUsage, &f)
	if code, ok := c.parse(fs, &f, args, 1); !ok {
		return code
	}
	kind := fs.Arg(0)
	if _, ok := dumpDataplanes[kind]; kind != "" && !ok {
		return c.usageError(fs, fmt.Sprintf("unknown dataplane %q: want hns or nft", kind))
	}
	d, err := f.client().Dump(context.Background())
	if err != nil {
		return c.fail("dump", err)
	}
	if kind != "" && !slices.Contains(dumpDataplanes[kind], d.Dataplane) {
		return c.fail("dump "+kind, fmt.Errorf("this node's agent runs the %s dataplane, which has no %s state: run \"nodenetctl dump %s\"",
			d.Dataplane, dumpNames[kind], dumpKind(d.Dataplane)))
	}
	if err := printAs(c.stdout, f.output, d, func(w io.Writer) { printDump(w, d) }); err != nil {
		return c.fail("dump", err)
	}
	return exitOK
}

// printDump prints each section under a "# title" line.
func printDump(w io.Writer, d *status.Dump) {
	if len(d.Sections) == 0 {
		fmt.Fprintf(w, "# the %s dataplane holds nothing\n", d.Dataplane)
		return
	}
	for i, s := range d.Sections {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "# %s\n", s.Title)
		text := s.Text
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		fmt.Fprint(w, text)
	}
}
