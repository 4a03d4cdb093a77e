package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWriteThenLoadRoundTrips(t *testing.T) {
	files := []string{
		"agent-minimal.yaml",
		"agent-windows-overlay.yaml",
		"agent-linux-l2bridge.yaml",
		"kube-proxy-windows.yaml",
		"kube-proxy-linux.yaml",
		"flannel-linux.json",
		"flannel-windows.json",
		"invalid-fields.yaml",
		"invalid-unknown-field.yaml",
	}
	for _, file := range files {
		for _, target := range []OS{OSLinux, OSWindows} {
			for _, shared := range []bool{false, true} {
				name := file + " for " + string(target)
				if shared {
					name += " as a shared config"
				}
				t.Run(name+" reads back equal after writing", func(t *testing.T) {
					opts := testOptions(target)
					opts.Shared = shared
					cfg, _, err := LoadFile("testdata/"+file, opts)
					if cfg == nil {
						t.Fatalf("LoadFile: %v", err)
					}
					path := filepath.Join(t.TempDir(), "config.yaml")
					if err := WriteFile(cfg, path); err != nil {
						t.Fatalf("WriteFile: %v", err)
					}
					again, _, err := LoadFile(path, opts)
					if again == nil {
						t.Fatalf("LoadFile of the written config: %v", err)
					}
					if diff := cmp.Diff(cfg, again); diff != "" {
						t.Errorf("round trip (-written +read):\n%s", diff)
					}
				})
			}
		}
	}
}

func TestMarshalPutsTypeMetaFirstAndKeepsFieldOrder(t *testing.T) {
	cfg, _ := mustLoad(t, []byte(cfgYAML), testOptions(OSLinux))
	out, err := Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, line := range strings.Split(string(out), "\n") {
		if key, _, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, " ") && !strings.HasPrefix(line, "-") {
			keys = append(keys, key)
		}
	}
	want := []string{"apiVersion", "kind", "clusterCIDRs", "serviceCIDRs", "nodeName", "ipFamilyPolicy",
		"syncPeriod", "minSyncPeriod", "configHardFail", "network", "proxy", "cni", "windows", "linux"}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("top-level keys (-want +got):\n%s\n%s", diff, out)
	}
}

func TestMarshalSetsTypeMetaWithoutTouchingItsInput(t *testing.T) {
	cfg := &AgentConfiguration{ClusterCIDRs: []string{"10.244.0.0/16"}}
	out, err := Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), "apiVersion: nodenet.io/v1alpha1\nkind: AgentConfiguration\n") {
		t.Errorf("Marshal output does not start with apiVersion and kind:\n%s", out)
	}
	if cfg.APIVersion != "" || cfg.Kind != "" {
		t.Errorf("Marshal changed its input's TypeMeta to %+v", cfg.TypeMeta)
	}
}

func TestWriteFileReplacesAtomically(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte("old contents"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _ := mustLoad(t, []byte(cfgYAML), testOptions(OSLinux))
	if err := WriteFile(cfg, path); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	want, _ := Marshal(cfg)
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("file contents (-want +got):\n%s", diff)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{"config.yaml"}, names); diff != "" {
		t.Errorf("directory holds temporary files (-want +got):\n%s", diff)
	}
}

func TestWriteFileIntoAMissingDirectoryFails(t *testing.T) {
	cfg, _ := mustLoad(t, []byte(cfgYAML), testOptions(OSLinux))
	err := WriteFile(cfg, filepath.Join(t.TempDir(), "missing", "config.yaml"))
	if err == nil || !strings.HasPrefix(err.Error(), "writing config: ") {
		t.Errorf("WriteFile error = %v, want a wrapped writing error", err)
	}
}
