package hns

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// citation is what counts as a source for a simulator rule (issue 14:
// "every simulator rule cites its source"): an upstream issue or PR
// ("issue 131466", "PR 137530", "#8465"), hnslib or one of its hcn
// files or types, a Microsoft doc by name, a winerror.h code, a file of
// kube-proxy winkernel, flannel or microsoft/SDN by path, or an explicit
// "unsourced:" that says what the rule assumes.
var citation = regexp.MustCompile(`(?i)\bissues?\s+\d+|\bPRs?\s+\d+|#\d{2,}|hnslib|\bhcn/|(?-i:\bhcn\.[A-Z])|Microsoft\s+Learn|Microsoft\s+docs?\b|"Windows\s+container\s+[a-z\s]+"|Host\s+Networking\s+Service|winerror|pkg/proxy/winkernel/|flannel-io/flannel|pkg/backend/[a-z]+/|microsoft/SDN|unsourced:`)

// markedRules are the simulator functions that encode a rule without
// returning an error: what happens to a packet (does this frontend
// apply, does NAT apply) or to HNS's state (what a restart loses or
// restores, when a network gets its provider address, what an update
// does on each version). Each must cite its source too. The test also
// finds rules by what they do (see isRule); this list is for the ones
// it cannot see.
var markedRules = []string{
	"frontendApplies", "traceLoadBalancer", "attachEncap", "traceRoute",
	"outboundNATFor", "natApplies", "hostCannotForward",
	"dropNonPersistent", "restoreLoadBalancers", "forgetEndpoint",
	"modifyRule", "scheduleProviderAddress", "settleNetworks",
	"assignDRMAC", "newDefaultNamespace", "aclBlocks",
}

// ruleFields are the Trace/Delivery/Packet fields a packet rule sets
// (drops, rewrites, encapsulation, DSR).
var ruleFields = map[string]bool{"Dropped": true, "Src": true, "Dst": true, "Encap": true, "DSR": true}

// isRule says whether fn encodes a simulator rule: it returns an HNS
// error (newError, codedError, an Error literal) or decides a packet's
// fate (sets a drop, rewrite or encapsulation field, or is listed in
// markedRules).
func isRule(fn *ast.FuncDecl) bool {
	if slices.Contains(markedRules, fn.Name.Name) {
		return true
	}
	found := false
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.CallExpr:
			if id, ok := x.Fun.(*ast.Ident); ok && (id.Name == "newError" || id.Name == "codedError") {
				found = true
			}
		case *ast.CompositeLit:
			if id, ok := x.Type.(*ast.Ident); ok && id.Name == "Error" {
				found = true
			}
		case *ast.AssignStmt:
			for _, lhs := range x.Lhs {
				if sel, ok := lhs.(*ast.SelectorExpr); ok && ruleFields[sel.Sel.Name] {
					found = true
				}
			}
		case *ast.KeyValueExpr:
			if id, ok := x.Key.(*ast.Ident); ok && (id.Name == "Encap" || id.Name == "DSR") {
				found = true
			}
		}
		return !found
	})
	return found
}

// cites reports whether fn's doc comment or a comment inside it cites a
// source.
func cites(file *ast.File, fn *ast.FuncDecl) bool {
	if fn.Doc != nil && citation.MatchString(fn.Doc.Text()) {
		return true
	}
	for _, cg := range file.Comments {
		if cg.Pos() >= fn.Body.Pos() && cg.End() <= fn.Body.End() && citation.MatchString(cg.Text()) {
			return true
		}
	}
	return false
}

// simulatorRuleFiles are the files whose functions hold the simulator's
// rules.
func simulatorRuleFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("sim_*.go")
	if err != nil {
		t.Fatal(err)
	}
	files = slices.DeleteFunc(files, func(f string) bool { return strings.HasSuffix(f, "_test.go") })
	return append(files, "trace.go")
}

// Every function of the simulator that encodes a rule (refuses a call,
// returns a particular error kind, or decides what happens to a packet)
// cites where the rule comes from, or says it is unsourced (issue 14).
func TestSimulatorRulesCiteTheirSources(t *testing.T) {
	fset := token.NewFileSet()
	seen := map[string]bool{}
	rules := 0
	for _, path := range simulatorRuleFiles(t) {
		file, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			seen[fn.Name.Name] = true
			if !isRule(fn) {
				continue
			}
			rules++
			if !cites(file, fn) {
				t.Errorf("%s: %s encodes a simulator rule but cites no source (an issue/PR number, an hnslib/hcn file or type, a Microsoft doc, a winerror.h code, a kube-proxy winkernel, flannel or microsoft/SDN file) and is not marked \"unsourced:\"",
					fset.Position(fn.Pos()), fn.Name.Name)
			}
		}
	}
	for _, name := range markedRules {
		if !seen[name] {
			t.Errorf("markedRules lists %s, which no simulator file defines any more", name)
		}
	}
	if rules < 30 {
		t.Errorf("found only %d rule functions: the detection is broken", rules)
	}
}
