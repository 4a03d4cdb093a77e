package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	t.Run("replaces the file and leaves no temporary file behind", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "10-nodenet.conflist")
		if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := Write(path, []byte("new"), 0o644); err != nil {
			t.Fatalf("Write: %v", err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != "new" {
			t.Errorf("file holds %q (%v), want %q", got, err, "new")
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
			t.Errorf("mode %v, want 0644", fi.Mode().Perm())
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 {
			t.Errorf("directory holds %d entries, want only the file", len(entries))
		}
	})
	t.Run("fails in a missing directory without creating anything", func(t *testing.T) {
		dir := t.TempDir()
		if err := Write(filepath.Join(dir, "missing", "f"), []byte("x"), 0o644); err == nil {
			t.Error("Write into a missing directory succeeded")
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("directory holds %d entries after a failed write", len(entries))
		}
	})
}
