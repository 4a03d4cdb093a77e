//go:build !windows

package cni

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestListenUnix(t *testing.T) {
	short := func(t *testing.T) string { // sun_path is 108 bytes
		dir, err := os.MkdirTemp("", "nn-l-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	t.Run("the socket is mode 0600 in a directory created 0700", func(t *testing.T) {
		path := filepath.Join(short(t), "run", "cni.sock")
		l, err := listenUnix(path)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("socket mode %v (%v), want 0600", fi.Mode().Perm(), err)
		}
		di, _ := os.Stat(filepath.Dir(path))
		if di.Mode().Perm() != 0o700 {
			t.Errorf("directory mode %v, want 0700", di.Mode().Perm())
		}
	})
	t.Run("a world-writable directory is refused", func(t *testing.T) {
		dir := short(t)
		if err := os.Chmod(dir, 0o1777); err != nil {
			t.Fatal(err)
		}
		_, err := listenUnix(filepath.Join(dir, "cni.sock"))
		if err == nil || !strings.Contains(err.Error(), "world-writable") {
			t.Errorf("got %v, want a world-writable error", err)
		}
	})
	t.Run("a stale socket is replaced", func(t *testing.T) {
		path := filepath.Join(short(t), "cni.sock")
		old, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		old.(*net.UnixListener).SetUnlinkOnClose(false)
		old.Close() // the path stays, nobody answers: a crashed agent's
		l, err := listenUnix(path)
		if err != nil {
			t.Fatalf("listen over a stale socket: %v", err)
		}
		l.Close()
	})
	t.Run("a live socket is an error, not stolen", func(t *testing.T) {
		path := filepath.Join(short(t), "cni.sock")
		live, err := listenUnix(path)
		if err != nil {
			t.Fatal(err)
		}
		defer live.Close()
		if _, err := listenUnix(path); err == nil || !strings.Contains(err.Error(), "second nodenet agent") {
			t.Errorf("got %v, want a second-agent error", err)
		}
	})
	t.Run("a regular file at the path is not removed", func(t *testing.T) {
		path := filepath.Join(short(t), "cni.sock")
		if err := os.WriteFile(path, []byte("precious"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := listenUnix(path); err == nil {
			t.Error("listened over a regular file")
		}
		if data, _ := os.ReadFile(path); string(data) != "precious" {
			t.Error("the regular file was changed")
		}
	})
}
