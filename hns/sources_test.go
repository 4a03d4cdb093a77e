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
// files or types, a Microsoft doc by name, a winerror.h code, or an
// explicit "unsourced:" that says what the rule assumes.
var citation = regexp.MustCompile(`(?i)\bissues? \d+|\bPRs? \d+|#\d{2,}|hnslib|\bhcn/|\bhcn\.[A-Z]|Microsoft Learn|Microsoft docs?\b|"Windows container [a-z ]+"|Host Networking Service|winerror|unsourced:`)

// packetRules are the trace functions that decide what happens to a
// packet without returning an error: each must cite its source too. The
// test also finds rules by what they do (see isRule), so this list only
// needs the ones that merely answer a question (does this frontend
// apply, does NAT apply).
var packetRules = []string{
	"frontendApplies", "traceLoadBalancer", "attachEncap", "traceRoute",
	"outboundNATFor", "natApplies", "hostCannotForward",
}

// ruleFields are the Trace/Delivery/Packet fields a packet rule sets
// (drops, rewrites, encapsulation, DSR).
var ruleFields = map[string]bool{"Dropped": true, "Src": true, "Dst": true, "Encap": true, "DSR": true}

// isRule says whether fn encodes a simulator rule: it returns an HNS
// error (newError, codedError) or decides a packet's fate (sets a
// drop, rewrite or encapsulation field, or is listed in packetRules).
func isRule(fn *ast.FuncDecl) bool {
	if slices.Contains(packetRules, fn.Name.Name) {
		return true
	}
	found := false
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.CallExpr:
			if id, ok := x.Fun.(*ast.Ident); ok && (id.Name == "newError" || id.Name == "codedError") {
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
				t.Errorf("%s: %s encodes a simulator rule but cites no source (an issue/PR number, an hnslib/hcn file or type, a Microsoft doc, a winerror.h code) and is not marked \"unsourced:\"",
					fset.Position(fn.Pos()), fn.Name.Name)
			}
		}
	}
	for _, name := range packetRules {
		if !seen[name] {
			t.Errorf("packetRules lists %s, which no simulator file defines any more", name)
		}
	}
	if rules < 30 {
		t.Errorf("found only %d rule functions: the detection is broken", rules)
	}
}
