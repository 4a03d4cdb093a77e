package apiserver

import (
	"errors"
	"os"
	"testing"
)

// StartForTest starts a server for t and stops it in t.Cleanup, after
// RequireBinaries.
func StartForTest(t testing.TB, opts Options) *Server {
	t.Helper()
	RequireBinaries(t, opts)
	s, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("start apiserver: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server logs (%s):\n%s", s.Dir, s.LogTail())
		}
		s.Stop()
	})
	return s
}

// RequireBinaries skips t when the binaries are missing, except under
// CI=true, where it fails t: CI must never pass by skipping.
func RequireBinaries(t testing.TB, opts Options) {
	t.Helper()
	_, err := findBinaries(opts)
	switch {
	case err == nil:
	case os.Getenv("CI") == "true":
		t.Fatalf("apiserver binaries missing under CI=true: %v; %s", err, BuildHint)
	case errors.Is(err, ErrBinaryMissing):
		t.Skipf("skipping: %v; %s", err, BuildHint)
	default:
		t.Fatalf("find apiserver binaries: %v", err)
	}
}
