package nftnl

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

var hookNames = map[int]string{
	unix.NF_INET_PRE_ROUTING:  "prerouting",
	unix.NF_INET_LOCAL_IN:     "input",
	unix.NF_INET_FORWARD:      "forward",
	unix.NF_INET_LOCAL_OUT:    "output",
	unix.NF_INET_POST_ROUTING: "postrouting",
}

// Describe returns a readable listing of the table, read over netlink in
// a few dumps: its chains (hook, type, priority, comment, and the number
// of rules with the comments of those that have one: rules are not
// decoded back into nft text), and its sets and maps (type, flags,
// timeout, comment and every element, decoded by the set's type). It is
// the agent's status dump; `nft list table` remains the tool for the
// rules themselves. A missing table is an error for which IsNotFound
// holds.
func (c *Conn) Describe(ctx context.Context) (string, error) {
	t, err := c.getTable(ctx)
	if err != nil {
		return "", err
	}
	chains, err := c.chains(ctx)
	if err != nil {
		return "", err
	}
	rules, err := c.rules(ctx, "")
	if err != nil {
		return "", err
	}
	sets, err := c.sets(ctx)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s {\n", c.table)
	if t.comment != "" {
		fmt.Fprintf(&b, "\tcomment %q\n", t.comment)
	}
	slices.SortFunc(chains, func(x, y chainInfo) int { return strings.Compare(x.name, y.name) })
	byChain := map[string][]Rule{}
	for _, r := range rules {
		byChain[r.chain] = append(byChain[r.chain], r.Rule)
	}
	for _, ch := range chains {
		fmt.Fprintf(&b, "\tchain %s {\n", ch.name)
		if ch.hook >= 0 {
			hook := hookNames[ch.hook]
			if hook == "" {
				hook = "hook-" + strconv.Itoa(ch.hook)
			}
			fmt.Fprintf(&b, "\t\ttype %s hook %s priority %d\n", ch.typ, hook, ch.priority)
		}
		if ch.comment != "" {
			fmt.Fprintf(&b, "\t\tcomment %q\n", ch.comment)
		}
		rs := byChain[ch.name]
		fmt.Fprintf(&b, "\t\t%s\n", count(len(rs), "rule"))
		for _, r := range rs {
			if r.Comment != "" {
				fmt.Fprintf(&b, "\t\trule handle %d comment %q\n", r.Handle, r.Comment)
			}
		}
		b.WriteString("\t}\n")
	}
	slices.SortFunc(sets, func(x, y setInfo) int { return strings.Compare(x.name, y.name) })
	for _, s := range sets {
		kind := "set"
		if s.isMap() {
			kind = "map"
		}
		fmt.Fprintf(&b, "\t%s %s {\n", kind, s.name)
		fmt.Fprintf(&b, "\t\ttype %s\n", s.typeString())
		var flags []string
		for _, f := range []struct {
			bit  uint32
			name string
		}{{unix.NFT_SET_CONSTANT, "constant"}, {unix.NFT_SET_INTERVAL, "interval"}, {unix.NFT_SET_TIMEOUT, "timeout"}, {unix.NFT_SET_EVAL, "dynamic"}} {
			if s.flags&f.bit != 0 {
				flags = append(flags, f.name)
			}
		}
		if len(flags) > 0 {
			fmt.Fprintf(&b, "\t\tflags %s\n", strings.Join(flags, ", "))
		}
		if s.timeoutMS != 0 {
			fmt.Fprintf(&b, "\t\ttimeout %s\n", time.Duration(s.timeoutMS)*time.Millisecond)
		}
		if s.comment != "" {
			fmt.Fprintf(&b, "\t\tcomment %q\n", s.comment)
		}
		st, err := kernelSetType(s)
		if err != nil {
			fmt.Fprintf(&b, "\t\t(elements not listed: %v)\n\t}\n", err)
			continue
		}
		elems, err := c.elements(ctx, s, st)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "\t\t%s\n", count(len(elems), "element"))
		for _, e := range elems {
			b.WriteString("\t\t" + strings.Join(e.Key, " . "))
			if len(e.Value) > 0 {
				b.WriteString(" : " + strings.Join(e.Value, " . "))
			}
			if e.Comment != nil {
				fmt.Fprintf(&b, " comment %q", *e.Comment)
			}
			b.WriteString("\n")
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return b.String(), nil
}

func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}
