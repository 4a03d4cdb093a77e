// Package install puts the CNI plugin binary where the container runtime
// execs it (the host's CNI bin dir), from the agent's image, without a
// shell: the DaemonSet's init container runs `nodenet-agent install-cni`.
//
// The runtime may exec the plugin at any moment, also while it is being
// replaced, so the new binary is written to a temporary file in the same
// directory, synced and given its mode, then renamed over the old one: a
// runtime sees the old binary or the new one, never a half-written file.
// Overwriting in place would also fail with ETXTBSY while a pod's ADD runs
// the old binary; a rename never does.
package install

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Options says what to install where.
type Options struct {
	// Source is the plugin binary to install (in the image).
	Source string
	// Dir is the runtime's CNI bin dir (the host's /opt/cni/bin, mounted).
	Dir string
	// Name is the file name in Dir; default: Source's base name.
	Name string
	// Mode is the installed file's mode; default 0o755.
	Mode os.FileMode
}

// Result says what Plugin did.
type Result struct {
	// Path is the installed file.
	Path string
	// Unchanged is true when Path already held the same bytes and mode,
	// so nothing was written.
	Unchanged bool
}

// Plugin installs opts.Source as opts.Dir/opts.Name atomically. It writes
// nothing when the file there is already identical. On any error nothing
// is left in Dir but what was there before (the temporary file is
// removed), and the error names the path that failed.
func Plugin(opts Options) (Result, error) {
	if opts.Source == "" || opts.Dir == "" {
		return Result{}, errors.New("install: source and dir are required")
	}
	name := opts.Name
	if name == "" {
		name = filepath.Base(opts.Source)
	}
	mode := opts.Mode
	if mode == 0 {
		mode = 0o755
	}
	dst := filepath.Join(opts.Dir, name)
	data, err := os.ReadFile(opts.Source)
	if err != nil {
		return Result{}, fmt.Errorf("read the plugin to install: %w", err)
	}
	st, err := os.Stat(opts.Dir)
	if err != nil {
		return Result{}, fmt.Errorf("CNI bin dir: %w", err)
	}
	if !st.IsDir() {
		return Result{}, fmt.Errorf("CNI bin dir %s is not a directory", opts.Dir)
	}
	if same(dst, data, mode) {
		return Result{Path: dst, Unchanged: true}, nil
	}
	tmp, err := os.CreateTemp(opts.Dir, "."+name+".new-*")
	if err != nil {
		return Result{}, fmt.Errorf("write to CNI bin dir %s: %w", opts.Dir, err)
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return Result{}, fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(mode); err != nil {
		return Result{}, fmt.Errorf("chmod %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		return Result{}, fmt.Errorf("sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return Result{}, fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err := replace(tmp.Name(), dst); err != nil {
		return Result{}, fmt.Errorf("install %s: %w", dst, err)
	}
	ok = true
	syncDir(opts.Dir)
	return Result{Path: dst}, nil
}

// same tells whether path already holds data with mode.
func same(path string, data []byte, mode os.FileMode) bool {
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() || st.Size() != int64(len(data)) || st.Mode().Perm() != mode.Perm() {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	have, err := io.ReadAll(f)
	return err == nil && bytes.Equal(have, data)
}

// syncDir makes the rename durable; a failure only loses durability.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
