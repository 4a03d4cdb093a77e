package cni

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/internal/atomicfile"
)

// Conflist versions: runtimes whose libcni knows spec 1.1 pick the highest
// entry of cniVersions (and so can send GC and STATUS); older ones read
// cniVersion.
const (
	conflistVersion = "1.0.0"
)

var conflistVersions = []string{"1.0.0", "1.1.0"}

// conflist is the file the runtime reads. Field order is fixed so that a
// rendered file is byte-for-byte stable (the writer compares bytes).
type conflist struct {
	CNIVersion  string          `json:"cniVersion"`
	CNIVersions []string        `json:"cniVersions"`
	Name        string          `json:"name"`
	Plugins     []conflistEntry `json:"plugins"`
}

type conflistEntry struct {
	Type         string          `json:"type"`
	SocketPath   string          `json:"socketPath"`
	Capabilities map[string]bool `json:"capabilities"`
}

// ConflistOptions are the facts the conflist carries; the agent fills
// them from its one config (network.name, cni.socketPath).
type ConflistOptions struct {
	// Network is the conflist's name: the node network's name.
	Network string
	// SocketPath is the agent's CNI socket, which nodenet-cni dials.
	SocketPath string
}

// RenderConflist renders the conflist: one nodenet-cni entry that points
// at the agent's socket and declares the portMappings (hostPort) and dns
// capabilities. Everything else the pod needs comes from the agent, so
// nothing here can drift from the proxy's view.
func RenderConflist(opts ConflistOptions) ([]byte, error) {
	if opts.Network == "" {
		return nil, errors.New("render conflist: no network name")
	}
	if opts.SocketPath == "" {
		return nil, errors.New("render conflist: no socket path")
	}
	out, err := json.MarshalIndent(conflist{
		CNIVersion:  conflistVersion,
		CNIVersions: conflistVersions,
		Name:        opts.Network,
		Plugins: []conflistEntry{{
			Type:         PluginType,
			SocketPath:   opts.SocketPath,
			Capabilities: map[string]bool{"portMappings": true, "dns": true},
		}},
	}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// ConflistWriter keeps the runtime's conflist equal to what the agent
// renders: the agent is its only writer, and an edited or deleted file is
// put back.
type ConflistWriter struct {
	// Path is the conflist's path (cni.confDir/cni.conflistName).
	Path string
	// Content is the rendered conflist.
	Content []byte
	// Logger reports rewrites. Default: klog.Background().
	Logger *klog.Logger
}

// Ensure writes the conflist unless it already holds Content. It reports
// whether it wrote. The write is atomic (temp file + rename), so a runtime
// never reads half a file.
func (w *ConflistWriter) Ensure() (bool, error) {
	current, err := os.ReadFile(w.Path)
	if err == nil && bytes.Equal(current, w.Content) {
		return false, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("read conflist: %w", err)
	}
	if err := writeConflist(w.Path, w.Content); err != nil {
		return false, fmt.Errorf("write conflist: %w", err)
	}
	return true, nil
}

// Run ensures the conflist now and then every interval until ctx ends.
// Errors are logged and retried; the first one is also returned
// synchronously by the initial Ensure so the agent can fail at start.
func (w *ConflistWriter) Run(ctx context.Context, interval time.Duration) error {
	log := klog.Background()
	if w.Logger != nil {
		log = *w.Logger
	}
	if _, err := w.Ensure(); err != nil {
		return err
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			wrote, err := w.Ensure()
			switch {
			case err != nil:
				log.Error(err, "Keeping the CNI conflist", "path", w.Path)
			case wrote:
				log.Info("CNI conflist was changed or removed by someone else; rewrote it", "path", w.Path)
			}
		}
	}
}

func writeConflist(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, data, 0o644)
}
