package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// fakeBuilds writes stand-in binaries for each platform under a new dir,
// with file times set to mtime.
func fakeBuilds(t *testing.T, mtime time.Time, plats ...Platform) []PlatformBinaries {
	t.Helper()
	var out []PlatformBinaries
	for _, p := range plats {
		dir := filepath.Join(t.TempDir(), p.Arch)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, b := range Binaries {
			f := filepath.Join(dir, b)
			if err := os.WriteFile(f, []byte(b+" for "+p.String()), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(f, mtime, mtime); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, PlatformBinaries{Platform: p, Dir: dir})
	}
	return out
}

var (
	amd64 = Platform{OS: "linux", Arch: "amd64"}
	arm64 = Platform{OS: "linux", Arch: "arm64"}
)

func writeImage(t *testing.T, builds []PlatformBinaries, ver string) (string, []byte) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "image.tar")
	digest, err := Write(Options{Out: out, Image: "example.test/nodenet:v1", Version: ver, Revision: "abc",
		Created: time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC), Builds: builds})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return digest, data
}

func TestWriteIsReproducible(t *testing.T) {
	d1, a1 := writeImage(t, fakeBuilds(t, time.Now(), amd64, arm64), "v1")
	d2, a2 := writeImage(t, fakeBuilds(t, time.Now().Add(-time.Hour), amd64, arm64), "v1")
	if d1 != d2 || !bytes.Equal(a1, a2) {
		t.Errorf("the same binaries written twice (other file times, other dirs) differ: %s vs %s, archives equal: %v", d1, d2, bytes.Equal(a1, a2))
	}
	d3, _ := writeImage(t, fakeBuilds(t, time.Now(), amd64, arm64), "v2")
	if d3 == d1 {
		t.Errorf("another version label gives the same digest %s", d3)
	}
}

// untar unpacks an archive into a new dir.
func untar(t *testing.T, data []byte) string {
	t.Helper()
	dir := t.TempDir()
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, h.Name)
		if h.Typeflag == tar.TypeDir {
			os.MkdirAll(p, 0o755)
			continue
		}
		os.MkdirAll(filepath.Dir(p), 0o755)
		b, _ := io.ReadAll(tr)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTheArchiveIsAnOCIIndexOfBothPlatforms(t *testing.T) {
	digest, data := writeImage(t, fakeBuilds(t, time.Now(), amd64, arm64), "v1")
	lp, err := layout.FromPath(untar(t, data))
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 1 || tm.Manifests[0].Digest.String() != digest ||
		tm.Manifests[0].Annotations["io.containerd.image.name"] != "example.test/nodenet:v1" ||
		tm.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v1" {
		t.Fatalf("index.json %+v, want one named index %s", tm.Manifests, digest)
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var plats []string
	for _, m := range im.Manifests {
		plats = append(plats, m.Platform.OS+"/"+m.Platform.Architecture)
		img, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Architecture != m.Platform.Architecture || cf.Config.Entrypoint[0] != "/usr/local/bin/nodenet-agent" ||
			cf.Config.Labels["org.opencontainers.image.version"] != "v1" {
			t.Errorf("%s config: arch %s entrypoint %v labels %v", m.Platform.Architecture, cf.Architecture, cf.Config.Entrypoint, cf.Config.Labels)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("layers %d, %v; want one", len(layers), err)
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		files := map[string]string{}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(tr)
			if h.Typeflag == tar.TypeReg {
				files[h.Name] = string(b)
				if h.Mode != 0o755 || h.Uid != 0 || !h.ModTime.Equal(time.Unix(0, 0)) {
					t.Errorf("%s: mode %o uid %d time %v, want 0755, root, the epoch", h.Name, h.Mode, h.Uid, h.ModTime)
				}
			}
		}
		rc.Close()
		for _, b := range Binaries {
			if want := b + " for linux/" + m.Platform.Architecture; files["usr/local/bin/"+b] != want {
				t.Errorf("%s layer: %s holds %q, want %q", m.Platform.Architecture, b, files["usr/local/bin/"+b], want)
			}
		}
		for f := range files {
			if filepath.Base(f) == "sh" || filepath.Base(f) == "nft" {
				t.Errorf("%s layer holds %s", m.Platform.Architecture, f)
			}
		}
	}
	slices.Sort(plats)
	if !slices.Equal(plats, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("platforms %v", plats)
	}
}

func TestParsePlatform(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Platform
		ok   bool
	}{
		{"linux/amd64", amd64, true},
		{"linux/arm64/v8", Platform{OS: "linux", Arch: "arm64", Variant: "v8"}, true},
		{"windows/amd64", Platform{}, false},
		{"linux", Platform{}, false},
	} {
		got, err := ParsePlatform(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParsePlatform(%q) = %v, %v", tc.in, got, err)
		}
	}
}
