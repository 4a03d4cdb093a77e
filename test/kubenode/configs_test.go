package kubenode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseImages(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    []Image
		wantErr bool
	}{
		{
			name: "relative archives are under the images dir; comments and blank lines are skipped",
			text: "# images\n\npause.tar registry.k8s.io/pause:3.10.1\n/abs/agnhost.tar registry.k8s.io/e2e-test-images/agnhost:2.59\n",
			want: []Image{
				{Archive: "/imgs/pause.tar", Ref: "registry.k8s.io/pause:3.10.1"},
				{Archive: "/abs/agnhost.tar", Ref: "registry.k8s.io/e2e-test-images/agnhost:2.59"},
			},
		},
		{name: "a line without a reference is an error", text: "pause.tar\n", wantErr: true},
		{name: "an empty list is an error", text: "# nothing\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseImages("/imgs", tt.text)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %t", err, tt.wantErr)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("image %d = %v, want %v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestPauseImage(t *testing.T) {
	tests := []struct {
		name    string
		refs    []string
		want    string
		wantErr bool
	}{
		{name: "the pause image by its last path element", refs: []string{"registry.k8s.io/e2e-test-images/agnhost:2.59", "registry.k8s.io/pause:3.10.1"}, want: "registry.k8s.io/pause:3.10.1"},
		{name: "an image merely containing pause in its path is not it", refs: []string{"example.com/pause/agnhost:1"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ims []Image
			for _, r := range tt.refs {
				ims = append(ims, Image{Ref: r})
			}
			got, err := PauseImage(ims)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("PauseImage = %q, %v; want %q (error %t)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestContainerdConfigLoads has the real containerd parse the config the
// harness writes and checks the CRI settings it reads back.
func TestContainerdConfigLoads(t *testing.T) {
	bin := os.Getenv(EnvContainerd)
	if bin == "" {
		t.Skipf("%s not set", EnvContainerd)
	}
	dir := t.TempDir()
	cfg := containerdConfig(containerdSpec{
		Root: filepath.Join(dir, "root"), State: filepath.Join(dir, "state"),
		Socket: filepath.Join(dir, "c.sock"), SandboxImage: "registry.k8s.io/pause:3.10.1",
		Runc: "/opt/runc", CNIConfDir: "/x/net.d", CNIBinDir: "/x/bin", Snapshotter: "overlayfs", NetnsUnderStateDir: true,
	})
	path := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := execOutput(bin, "--config", path, "config", "dump")
	if err != nil {
		t.Fatalf("containerd config dump: %v\n%s", err, out)
	}
	for _, want := range []string{
		"restrict_oom_score_adj = true", "netns_mounts_under_state_dir = true",
		"BinaryName = '/opt/runc'", "conf_dir = '/x/net.d'", "'/x/bin'",
		"sandbox = 'registry.k8s.io/pause:3.10.1'", "SystemdCgroup = false",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("containerd's view of the config lacks %q:\n%s", want, out)
		}
	}
}
