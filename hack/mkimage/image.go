package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Platform is an image platform, "os/arch[/variant]".
type Platform struct{ OS, Arch, Variant string }

func (p Platform) String() string {
	if p.Variant != "" {
		return p.OS + "/" + p.Arch + "/" + p.Variant
	}
	return p.OS + "/" + p.Arch
}

// ParsePlatform parses "linux/amd64" or "linux/arm64/v8".
func ParsePlatform(s string) (Platform, error) {
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] != "linux" || parts[1] == "" {
		return Platform{}, fmt.Errorf("platform %q: want linux/ARCH[/VARIANT]", s)
	}
	p := Platform{OS: parts[0], Arch: parts[1]}
	if len(parts) == 3 {
		p.Variant = parts[2]
	}
	return p, nil
}

// PlatformBinaries is one platform's built binaries (Binaries, in Dir).
type PlatformBinaries struct {
	Platform Platform
	Dir      string
}

// Options says what Write writes.
type Options struct {
	// Out is the OCI layout archive to write.
	Out string
	// Image is the name the archive's index carries
	// (io.containerd.image.name and org.opencontainers.image.ref.name).
	Image string
	// Version and Revision label the images.
	Version, Revision string
	// Created is every image's creation time.
	Created time.Time
	// Builds are the platforms, in index order.
	Builds []PlatformBinaries
}

// binDir is where the binaries go in the image; the DaemonSets run them
// from there.
const binDir = "/usr/local/bin"

// Write writes the image index as an OCI layout archive at opts.Out and
// returns the index's digest. The same inputs give the same bytes.
func Write(opts Options) (string, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, b := range opts.Builds {
		img, err := platformImage(b, opts)
		if err != nil {
			return "", err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{
				OS: b.Platform.OS, Architecture: b.Platform.Arch, Variant: b.Platform.Variant}},
		})
	}
	digest, err := idx.Digest()
	if err != nil {
		return "", err
	}

	dir, err := os.MkdirTemp(filepath.Dir(opts.Out), ".mkimage-layout-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return "", err
	}
	tag := opts.Image
	if i := strings.LastIndex(tag, ":"); i > strings.LastIndex(tag, "/") {
		tag = tag[i+1:]
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		// containerd names the imported image after the first, skopeo
		// and the OCI spec use the second (a tag).
		"io.containerd.image.name":          opts.Image,
		"org.opencontainers.image.ref.name": tag,
	})); err != nil {
		return "", err
	}
	if err := tarDir(dir, opts.Out); err != nil {
		return "", err
	}
	return digest.String(), nil
}

// platformImage is one platform's image: one layer with the binaries.
func platformImage(b PlatformBinaries, opts Options) (v1.Image, error) {
	layerTar, err := binariesLayer(b.Dir)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("%s layer: %w", b.Platform, err)
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	created := v1.Time{Time: opts.Created}
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{
		Created:   created,
		CreatedBy: "hack/mkimage: " + strings.Join(Binaries, ", ") + " in " + binDir,
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = b.Platform.OS, b.Platform.Arch, b.Platform.Variant
	cf.Created = created
	cf.Config.Entrypoint = []string{binDir + "/nodenet-agent"}
	cf.Config.Env = []string{"PATH=" + binDir + ":/usr/bin:/bin"}
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":    "nodenet",
		"org.opencontainers.image.source":   "https://github.com/nodenet/nodenet",
		"org.opencontainers.image.version":  opts.Version,
		"org.opencontainers.image.revision": opts.Revision,
	}
	return mutate.ConfigFile(img, cf)
}

// binariesLayer is the layer's tar: usr/, usr/local/, usr/local/bin/ and
// each of Binaries, owned by root, mode 0755, at the Unix epoch, in a
// fixed order; plus /tmp (1777), which Go's os.TempDir names.
func binariesLayer(dir string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	dirHdr := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, ModTime: epoch, Format: tar.FormatPAX})
	}
	for _, d := range []string{"tmp/", "usr/", "usr/local/", "usr/local/bin/"} {
		mode := int64(0o755)
		if d == "tmp/" {
			mode = 0o1777
		}
		if err := dirHdr(d, mode); err != nil {
			return nil, err
		}
	}
	for _, name := range Binaries {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("binary %s: %w", name, err)
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: path.Join(binDir[1:], name), Mode: 0o755,
			Size: int64(len(data)), ModTime: epoch, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tarDir writes the files under dir into the tar archive out (written
// to a temporary name and renamed), sorted, at the epoch, owned by root:
// its bytes depend only on the files' contents.
func tarDir(dir, out string) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			names = append(names, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	tmp, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".new-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	tw := tar.NewWriter(tmp)
	epoch := time.Unix(0, 0)
	for _, p := range names {
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if st.IsDir() {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: rel + "/", Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
				return err
			}
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: 0o644, Size: int64(len(data)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), out)
}
