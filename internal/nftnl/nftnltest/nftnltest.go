// Package nftnltest helps tests compare a table written over netlink
// (internal/nftnl) with the one nft writes from the same text.
package nftnltest

import (
	"regexp"
	"strings"
)

var (
	ruleHeader = regexp.MustCompile(`^(\S+ \S+ \S+)( \d+)*$`)
	anonSet    = regexp.MustCompile(`__set\d+`)
)

// RuleExpressions extracts the rules from the output of `nft
// --debug=netlink list table …`: each rule's chain and the expressions
// the kernel holds for it, one per line, as nft prints them ("[ payload
// load 4b @ network header + 16 => reg 1 ]"). Rule handles and the
// numbers of anonymous sets are dropped, so two tables built the same way
// in two namespaces compare equal. Sets and elements are left out: their
// order is the kernel's hash order, and `nft list` shows them.
func RuleExpressions(debugOutput string) string {
	var b strings.Builder
	inRule := false
	for _, line := range strings.Split(debugOutput, "\n") {
		switch {
		case strings.HasPrefix(line, "  ["):
			if inRule {
				b.WriteString(anonSet.ReplaceAllString(line, "__set") + "\n")
			}
		case ruleHeader.MatchString(line) && !strings.Contains(line, " @"):
			m := ruleHeader.FindStringSubmatch(line)
			b.WriteString(m[1] + "\n")
			inRule = true
		default:
			inRule = false
		}
	}
	return b.String()
}
