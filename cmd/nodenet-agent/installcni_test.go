package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInstallCNICommand(t *testing.T) {
	src := filepath.Join(t.TempDir(), "nodenet-cni")
	if err := os.WriteFile(src, []byte("plugin v2"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tests := []struct {
		name     string
		args     []string
		code     int
		stdout   string
		stderr   string
		wantFile bool
	}{
		{name: "without --dir it is a usage error", args: []string{"install-cni"}, code: exitUsage, stderr: "--dir is required"},
		{name: "a missing source fails naming it", args: []string{"install-cni", "--dir", dir, "--source", src + ".absent"}, code: exitFailed, stderr: "nodenet-cni.absent"},
		{name: "it installs the plugin", args: []string{"install-cni", "--dir", dir, "--source", src}, code: exitOK, stdout: "installed " + filepath.Join(dir, "nodenet-cni"), wantFile: true},
		{name: "a second run finds it up to date", args: []string{"install-cni", "--dir", dir, "--source", src}, code: exitOK, stdout: "up to date", wantFile: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, &stdout, &stderr); code != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.code, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stdout %q stderr %q, want them to contain %q and %q", stdout.String(), stderr.String(), tc.stdout, tc.stderr)
			}
			got, err := os.ReadFile(filepath.Join(dir, "nodenet-cni"))
			if tc.wantFile && string(got) != "plugin v2" {
				t.Errorf("installed %q, %v", got, err)
			}
		})
	}
}

func TestVersionCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"version"}, &stdout, &stderr); code != exitOK || strings.TrimSpace(stdout.String()) == "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}
