// Command configref writes docs/config-reference.md, the reference of every
// AgentConfiguration field, from the config package itself:
//
//	go run ./hack/configref -o docs/config-reference.md   # make config-reference
//
// Descriptions are the fields' doc comments in config/types.go (read with
// go/parser and rendered with go/doc/comment); YAML paths are the json
// tags; enum values are the constants of each named string type; defaults
// are what config.SetDefaults fills into an empty config for a Linux and a
// Windows node, and, where defaulting leaves a field empty, the comment's
// own "Default: ..." sentence. The walk starts at AgentConfiguration and
// descends into every nested struct, so a new field is in the reference as
// soon as it is in the type. The test next to this file fails when the
// committed reference is stale.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	out := flag.String("o", "", "write the reference to this file (atomically) instead of stdout")
	flag.Parse()
	root, err := moduleRoot()
	if err != nil {
		fail(err)
	}
	ref, err := Generate(filepath.Join(root, "config"))
	if err != nil {
		fail(err)
	}
	if *out == "" {
		if _, err := os.Stdout.Write(ref); err != nil {
			fail(err)
		}
		return
	}
	if old, err := os.ReadFile(*out); err == nil && bytes.Equal(old, ref) {
		return
	}
	tmp := *out + ".tmp"
	if err := os.WriteFile(tmp, ref, 0o644); err != nil {
		fail(err)
	}
	if err := os.Rename(tmp, *out); err != nil {
		os.Remove(tmp)
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "configref: %v\n", err)
	os.Exit(1)
}

// moduleRoot finds the directory of nodenet's go.mod from the working
// directory up, so the command works from the repository root (go run) and
// from its own folder (go test).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(data, []byte("module github.com/nodenet/nodenet\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of github.com/nodenet/nodenet above the working directory")
		}
		dir = parent
	}
}
