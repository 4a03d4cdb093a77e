package install

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func writeFile(t *testing.T, path, body string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// entries lists a directory's names.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestPlugin(t *testing.T) {
	tests := []struct {
		name      string
		existing  string // "" = no file at the destination
		mode      os.FileMode
		unchanged bool
	}{
		{name: "a fresh bin dir gets the plugin, executable", mode: 0o755},
		{name: "an older plugin is replaced", existing: "old plugin", mode: 0o755},
		{name: "the same plugin is left alone", existing: "new plugin", mode: 0o755, unchanged: true},
		{name: "the same bytes with the wrong mode are rewritten", existing: "new plugin", mode: 0o644},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := filepath.Join(t.TempDir(), "nodenet-cni")
			writeFile(t, src, "new plugin", 0o755)
			dir := t.TempDir()
			dst := filepath.Join(dir, "nodenet-cni")
			if tc.existing != "" {
				writeFile(t, dst, tc.existing, tc.mode)
			}
			res, err := Plugin(Options{Source: src, Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			if res.Path != dst || res.Unchanged != tc.unchanged {
				t.Errorf("result %+v, want path %s unchanged %v", res, dst, tc.unchanged)
			}
			got, err := os.ReadFile(dst)
			if err != nil || !bytes.Equal(got, []byte("new plugin")) {
				t.Fatalf("installed %q, %v", got, err)
			}
			if st, _ := os.Stat(dst); runtime.GOOS != "windows" && st.Mode().Perm() != 0o755 {
				t.Errorf("mode %v, want 0755", st.Mode().Perm())
			}
			if names := entries(t, dir); len(names) != 1 {
				t.Errorf("bin dir holds %v, want only the plugin", names)
			}
		})
	}
}

func TestPluginErrorsLeaveNothing(t *testing.T) {
	t.Run("a missing source names it", func(t *testing.T) {
		dir := t.TempDir()
		_, err := Plugin(Options{Source: filepath.Join(dir, "absent"), Dir: dir})
		if err == nil || !strings.Contains(err.Error(), "absent") {
			t.Fatalf("err %v, want it to name the source", err)
		}
	})
	t.Run("a missing bin dir names it", func(t *testing.T) {
		src := filepath.Join(t.TempDir(), "nodenet-cni")
		writeFile(t, src, "x", 0o755)
		dir := filepath.Join(t.TempDir(), "opt-cni-bin")
		_, err := Plugin(Options{Source: src, Dir: dir})
		if err == nil || !strings.Contains(err.Error(), dir) {
			t.Fatalf("err %v, want it to name %s", err, dir)
		}
	})
	t.Run("a read-only bin dir fails clearly and keeps the old plugin", func(t *testing.T) {
		if runtime.GOOS == "windows" {
			t.Skip("directory modes do not make a directory read-only on Windows")
		}
		src := filepath.Join(t.TempDir(), "nodenet-cni")
		writeFile(t, src, "new", 0o755)
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "nodenet-cni"), "old", 0o755)
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		if os.Geteuid() == 0 {
			// Root ignores directory modes; a read-only bind mount is what
			// a node really has. Mount one if we can.
			if err := roBind(t, dir); err != nil {
				t.Skipf("cannot make a read-only mount: %v", err)
			}
		}
		_, err := Plugin(Options{Source: src, Dir: dir})
		if err == nil || !strings.Contains(err.Error(), dir) {
			t.Fatalf("err %v, want a clear error naming %s", err, dir)
		}
		got, _ := os.ReadFile(filepath.Join(dir, "nodenet-cni"))
		if string(got) != "old" {
			t.Errorf("the plugin is now %q, want the old one kept", got)
		}
		if names := entries(t, dir); len(names) != 1 {
			t.Errorf("bin dir holds %v, want only the old plugin", names)
		}
	})
}
