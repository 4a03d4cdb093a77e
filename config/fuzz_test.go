package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzLoad loads arbitrary bytes for either OS: Load must never panic,
// and whatever it returns a config for must survive Marshal and Load
// unchanged.
func FuzzLoad(f *testing.F) {
	// Seed with every config file (not testdata/fuzz, the fuzzer's corpus).
	yamlFiles, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		f.Fatal(err)
	}
	jsonFiles, err := filepath.Glob("testdata/*.json")
	if err != nil {
		f.Fatal(err)
	}
	files := append(yamlFiles, jsonFiles...)
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, false)
		f.Add(data, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, windows bool) {
		opts := testOptions(OSLinux)
		if windows {
			opts.OS = OSWindows
		}
		cfg, _, _ := Load(data, opts)
		if cfg == nil {
			return
		}
		out, err := Marshal(cfg)
		if err != nil {
			t.Fatalf("Marshal of a loaded config: %v", err)
		}
		again, _, err := Load(out, opts)
		if again == nil {
			t.Fatalf("Load of a marshaled config: %v\n%s", err, out)
		}
		// YAML can't tell nil from empty lists and maps; neither do consumers.
		if diff := cmp.Diff(cfg, again, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip (-loaded +reloaded):\n%s\nmarshaled:\n%s", diff, out)
		}
	})
}
