package cni

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/nodenet/nodenet/config"
)

func testConfig(t *testing.T) *config.AgentConfiguration {
	t.Helper()
	cfg := &config.AgentConfiguration{ClusterCIDRs: []string{"10.244.0.0/16"}, ServiceCIDRs: []string{"10.96.0.0/12"}}
	config.SetDefaults(cfg, config.DefaultingOptions{OS: config.OSLinux, Hostname: func() (string, error) { return "node-a", nil }})
	return cfg
}

// conflistOptions is what the agent passes for cfg.
func conflistOptions(cfg *config.AgentConfiguration) ConflistOptions {
	return ConflistOptions{Network: cfg.Network.Name, SocketPath: cfg.CNI.SocketPath}
}

func TestRenderConflist(t *testing.T) {
	cfg := testConfig(t)
	cfg.CNI.SocketPath = "/run/nodenet-test/cni.sock"
	data, err := RenderConflist(conflistOptions(cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("libcni reads it as one nodenet-cni entry with the agent's socket", func(t *testing.T) {
		list, err := libcni.ConfListFromBytes(data)
		if err != nil {
			t.Fatalf("libcni: %v", err)
		}
		if list.Name != "nodenet" || len(list.Plugins) != 1 || list.Plugins[0].Network.Type != PluginType {
			t.Fatalf("got list %q with %d plugins", list.Name, len(list.Plugins))
		}
		var entry NetConf
		if err := json.Unmarshal(list.Plugins[0].Bytes, &entry); err != nil {
			t.Fatal(err)
		}
		if entry.SocketPath != cfg.CNI.SocketPath {
			t.Errorf("socketPath %q, want %q", entry.SocketPath, cfg.CNI.SocketPath)
		}
		if !entry.Capabilities["portMappings"] || !entry.Capabilities["dns"] {
			t.Errorf("capabilities %v, want portMappings and dns", entry.Capabilities)
		}
	})
	t.Run("a spec-1.1 runtime picks 1.1.0 from cniVersions", func(t *testing.T) {
		list, err := libcni.ConfListFromBytes(data)
		if err != nil {
			t.Fatal(err)
		}
		if list.CNIVersion != "1.1.0" {
			t.Errorf("libcni chose cniVersion %q, want 1.1.0 (GC and STATUS need it)", list.CNIVersion)
		}
	})
	t.Run("rendering is stable", func(t *testing.T) {
		again, _ := RenderConflist(conflistOptions(cfg))
		if string(again) != string(data) {
			t.Error("two renders of one config differ")
		}
	})
	t.Run("a config without a socket path is refused", func(t *testing.T) {
		cfg := testConfig(t)
		cfg.CNI.SocketPath = ""
		if _, err := RenderConflist(conflistOptions(cfg)); err == nil {
			t.Error("rendered a conflist without a socket path")
		}
	})
	t.Run("a config without a network name is refused", func(t *testing.T) {
		cfg := testConfig(t)
		cfg.Network.Name = ""
		if _, err := RenderConflist(conflistOptions(cfg)); err == nil {
			t.Error("rendered a conflist without a network name")
		}
	})
}

func TestConflistWriter(t *testing.T) {
	dir := t.TempDir()
	w := &ConflistWriter{Path: filepath.Join(dir, "net.d", "10-nodenet.conflist"), Content: []byte("{\"v\":1}\n")}
	read := func() string {
		data, _ := os.ReadFile(w.Path)
		return string(data)
	}
	t.Run("writes a missing file, creating its directory", func(t *testing.T) {
		wrote, err := w.Ensure()
		if err != nil || !wrote || read() != string(w.Content) {
			t.Fatalf("Ensure wrote=%v err=%v, file %q", wrote, err, read())
		}
	})
	t.Run("leaves a correct file alone", func(t *testing.T) {
		before, _ := os.Stat(w.Path)
		wrote, err := w.Ensure()
		after, _ := os.Stat(w.Path)
		if err != nil || wrote || !os.SameFile(before, after) {
			t.Errorf("Ensure on a correct file: wrote=%v err=%v, replaced=%v", wrote, err, !os.SameFile(before, after))
		}
	})
	t.Run("puts back a file someone edited", func(t *testing.T) {
		if err := os.WriteFile(w.Path, []byte(`{"edited":true}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if wrote, err := w.Ensure(); err != nil || !wrote || read() != string(w.Content) {
			t.Errorf("Ensure after an edit: wrote=%v err=%v, file %q", wrote, err, read())
		}
	})
	t.Run("Run puts back a deleted file on its next tick", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- w.Run(ctx, 10*time.Millisecond) }()
		if err := os.Remove(w.Path); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for read() != string(w.Content) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if read() != string(w.Content) {
			t.Error("Run did not restore the deleted conflist")
		}
	})
}
