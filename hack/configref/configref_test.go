package main

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodenet/nodenet/config"
)

func configDir(t *testing.T) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "config")
}

func TestCommittedReferenceIsUpToDate(t *testing.T) {
	want, err := Generate(configDir(t))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(filepath.Dir(configDir(t)), "docs", "config-reference.md")
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: run make config-reference", err)
	}
	if string(got) == string(want) {
		return
	}
	gotLines, wantLines := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < max(len(gotLines), len(wantLines)); i++ {
		var g, w string
		if i < len(gotLines) {
			g = gotLines[i]
		}
		if i < len(wantLines) {
			w = wantLines[i]
		}
		if g != w {
			t.Fatalf("docs/config-reference.md is stale (config/types.go or the defaults changed): run make config-reference\nfirst difference, line %d:\n committed: %q\n generated: %q", i+1, g, w)
		}
	}
}

// walkFields parses the package and returns every entry, sections included.
func walkFields(t *testing.T) []*field {
	t.Helper()
	info, err := parsePackage(configDir(t))
	if err != nil {
		t.Fatal(err)
	}
	sections, err := walk(info)
	if err != nil {
		t.Fatal(err)
	}
	var fields []*field
	for _, s := range sections {
		fields = append(fields, s.Fields...)
	}
	return fields
}

// jsonPaths lists every YAML path of t's fields, through nested structs,
// from the compiled type: what the reference must cover.
func jsonPaths(prefix string, typ reflect.Type) []string {
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	var paths []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && opts == "inline" {
			paths = append(paths, jsonPaths(prefix, f.Type)...)
			continue
		}
		path := join(prefix, name)
		paths = append(paths, path)
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft.PkgPath() == reflect.TypeOf(config.AgentConfiguration{}).PkgPath() {
			paths = append(paths, jsonPaths(path, ft)...)
		}
	}
	return paths
}

func TestEveryFieldIsInTheReference(t *testing.T) {
	var got []string
	for _, f := range walkFields(t) {
		got = append(got, f.Path)
	}
	want := jsonPaths("", reflect.TypeOf(config.AgentConfiguration{}))
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("fields in the reference differ from the compiled type\n reference: %v\n type:      %v", got, want)
	}
}

// Every leaf field's comment must say its default (or that it is
// required) and, except apiVersion and kind, whether it is cluster-wide
// or node-local; a default the comment states must be the one the code
// sets.
func TestEveryFieldStatesItsDefaultAndScope(t *testing.T) {
	for _, f := range walkFields(t) {
		if f.Section {
			continue
		}
		typeMeta := f.Path == "apiVersion" || f.Path == "kind"
		if !typeMeta && f.CommentDefault == "" && !f.Required {
			t.Errorf("%s (config %s): the comment has no \"Default: ...\" sentence and does not say Required", f.Path, f.GoPath)
		}
		if !typeMeta && f.Scope == "" {
			t.Errorf("%s (config %s): the comment (or its struct's) says neither cluster-wide nor node-local", f.Path, f.GoPath)
		}
		for _, v := range []struct{ os, value string }{{"linux", f.Linux}, {"windows", f.Windows}} {
			if v.value == "" || f.CommentDefault == "" {
				continue
			}
			norm := func(s string) string { return strings.NewReplacer(`"`, "", " ", "").Replace(s) }
			if !strings.Contains(norm(f.CommentDefault), norm(v.value)) {
				t.Errorf("%s (config %s): the comment says \"Default: %s\", but the %s default is %s", f.Path, f.GoPath, f.CommentDefault, v.os, v.value)
			}
		}
	}
}

func TestShortDuration(t *testing.T) {
	for in, want := range map[string]string{"24h0m0s": "24h", "1h0m0s": "1h", "30s": "30s", "1m30s": "1m30s", "1h30m0s": "1h30m", "0s": "0s"} {
		d, err := time.ParseDuration(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestMarkdownJoinsLinesAndKeepsBlocks(t *testing.T) {
	doc := "The kube-\nproxy value is\nC:\\x, not *y*.\n\n\tcode  block\n\nlast one-\nTwo\n"
	want := "The kube-proxy value is C:\\x, not \\*y\\*.\n\n```\n\tcode  block\n```\n\nlast one- Two"
	if got := markdown(doc); got != want {
		t.Errorf("markdown:\n got %q\nwant %q", got, want)
	}
}
