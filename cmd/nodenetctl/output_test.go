package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/nodenet/nodenet/agent/status"
)

// testNow is the clock of every agent-command test.
var testNow = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// shortTempDir is a temporary directory whose path fits a unix socket's
// 107 bytes (t.TempDir() holds the test's long name).
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "nctl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// fakeAgent serves canned answers on the agent's local API; a nil answer
// is a 500.
type fakeAgent struct {
	status   *status.Status
	services *status.Services
	dump     *status.Dump
}

// start serves the agent on a socket in a fresh directory and returns the
// socket's path.
func (a fakeAgent) start(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	for path, v := range map[string]any{status.PathStatus: a.status, status.PathServices: a.services, status.PathDump: a.dump} {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
			if isNil(v) {
				http.Error(w, "not ready", http.StatusInternalServerError)
				return
			}
			json.NewEncoder(w).Encode(v)
		})
	}
	sock := filepath.Join(shortTempDir(t), status.SocketName)
	l, err := status.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- status.Serve(ctx, l, mux) }()
	t.Cleanup(func() { cancel(); <-done })
	return sock
}

func isNil(v any) bool {
	switch v := v.(type) {
	case *status.Status:
		return v == nil
	case *status.Services:
		return v == nil
	case *status.Dump:
		return v == nil
	}
	return v == nil
}

// runCtl runs an agent command with the test clock and kube as the API
// server doctor --kubeconfig talks to.
func runCtl(kube kubernetes.Interface, args ...string) result {
	var stdout, stderr bytes.Buffer
	c := &ctl{
		stdout: &stdout, stderr: &stderr,
		now: func() time.Time { return testNow },
		newKube: func(string, time.Duration) (kubernetes.Interface, error) {
			return kube, nil
		},
	}
	code := c.run(args)
	return result{code, stdout.String(), stderr.String()}
}

// lines returns out's lines with runs of spaces collapsed, so tests don't
// depend on column widths.
func lines(out string) []string {
	var ls []string
	for l := range strings.SplitSeq(strings.TrimRight(out, "\n"), "\n") {
		ls = append(ls, strings.Join(strings.Fields(l), " "))
	}
	return ls
}

func TestTheDefaultSocketIsNextToTheDefaultCNISocket(t *testing.T) {
	want := "/var/run/nodenet/agent.sock"
	if filepath.Separator == '\\' {
		want = `C:\ProgramData\nodenet\agent.sock`
	}
	if got := defaultSocketPath(); got != want {
		t.Errorf("defaultSocketPath() = %q, want %q", got, want)
	}
}

func TestAgentCommandsRejectBadFlags(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"an unknown output format is a usage error", []string{"status", "-o", "wide"}, exitUsage, `nodenetctl status: -o must be table, json or yaml, not "wide"`},
		{"status takes no arguments", []string{"status", "extra"}, exitUsage, "nodenetctl status: unexpected arguments: extra"},
		{"dump takes one dataplane", []string{"dump", "hns", "nft"}, exitUsage, "nodenetctl dump: unexpected arguments: nft"},
		{"dump knows only hns and nft", []string{"dump", "ipvs"}, exitUsage, `nodenetctl dump: unknown dataplane "ipvs": want hns or nft`},
		{"help is not an error", []string{"services", "--help"}, exitOK, "Usage: nodenetctl services [flags]"},
		{"an unknown flag is a usage error", []string{"doctor", "--node", "x"}, exitUsage, "nodenetctl doctor: unknown flag: --node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCtl(nil, tt.args...)
			if r.code != tt.wantCode {
				t.Errorf("exit code %d, want %d; stderr:\n%s", r.code, tt.wantCode, r.stderr)
			}
			if !strings.Contains(r.stderr, tt.wantStderr) {
				t.Errorf("stderr does not contain %q:\n%s", tt.wantStderr, r.stderr)
			}
		})
	}
}

func TestMainDispatchesTheAgentCommands(t *testing.T) {
	sock := filepath.Join(shortTempDir(t), status.SocketName)
	for _, cmd := range []string{"status", "services", "dump", "doctor"} {
		r := runArgs(cmd, "--socket", sock)
		if r.code != exitFailed {
			t.Errorf("%s without an agent: exit code %d, want %d", cmd, r.code, exitFailed)
		}
		if want := "is the agent running on this node? no socket at " + sock; !strings.Contains(r.stderr+r.stdout, want) {
			t.Errorf("%s without an agent does not say %q:\nstdout:\n%s\nstderr:\n%s", cmd, want, r.stdout, r.stderr)
		}
	}
}
