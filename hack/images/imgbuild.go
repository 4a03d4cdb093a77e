//go:build ignore

// Command imgbuild writes a single-layer image as a docker archive that
// `ctr -n k8s.io images import` accepts, so the node and e2e images need no
// registry. hack/build-node-binaries.sh builds it in a scratch module (the
// build tag keeps go-containerregistry out of nodenet's go.mod).
//
//	imgbuild -o out.tar -tag REF [-tag REF...] [-entrypoint /x] [-cmd arg]...
//	    [-file SRC=DST] [-link DST=TARGET] [-dir DST] [-text DST=CONTENT]
//	    [-env K=V] [-user UID]
//
// Files keep their source mode; -dir makes a 1777 directory (for /tmp).
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

// entry is one file-system entry of the layer, in the order given.
type entry struct {
	kind, dst, arg string // kind: file, link, dir, text
}

type entries []entry

func (e *entries) add(kind string) func(string) error {
	return func(v string) error {
		dst, arg, ok := strings.Cut(v, "=")
		if kind == "dir" {
			dst, arg, ok = v, "", true
		}
		if !ok || !strings.HasPrefix(dst, "/") {
			return fmt.Errorf("want /DST=VALUE, got %q", v)
		}
		*e = append(*e, entry{kind, dst, arg})
		return nil
	}
}

func main() {
	var (
		out, entrypoint, user string
		tags, cmd, env        list
		ents                  entries
	)
	flag.StringVar(&out, "o", "", "output archive")
	flag.StringVar(&entrypoint, "entrypoint", "", "image entrypoint (one path)")
	flag.StringVar(&user, "user", "", "image user")
	flag.Var(&tags, "tag", "image reference (repeatable)")
	flag.Var(&cmd, "cmd", "image cmd argument (repeatable)")
	flag.Var(&env, "env", "K=V environment (repeatable)")
	flag.Func("file", "SRC=DST: copy a host file", func(v string) error {
		src, dst, ok := strings.Cut(v, "=")
		if !ok {
			return fmt.Errorf("want SRC=/DST, got %q", v)
		}
		return ents.add("file")(dst + "=" + src)
	})
	flag.Func("link", "DST=TARGET: symlink", ents.add("link"))
	flag.Func("text", "DST=CONTENT: a small text file", ents.add("text"))
	flag.Func("dir", "DST: a world-writable sticky directory", ents.add("dir"))
	flag.Parse()
	if out == "" || len(tags) == 0 {
		log.Fatal("imgbuild: -o and at least one -tag are required")
	}

	layerTar, err := writeLayer(ents)
	if err != nil {
		log.Fatalf("imgbuild: %v", err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		log.Fatalf("imgbuild: layer: %v", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		log.Fatalf("imgbuild: %v", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		log.Fatalf("imgbuild: %v", err)
	}
	cf = cf.DeepCopy()
	// The runtime matches images to its platform through these two fields.
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cf.Config.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, env...)
	if entrypoint != "" {
		cf.Config.Entrypoint = []string{entrypoint}
	}
	cf.Config.Cmd = cmd
	cf.Config.User = user
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		log.Fatalf("imgbuild: %v", err)
	}
	refs := map[name.Reference]v1.Image{}
	for _, t := range tags {
		ref, err := name.NewTag(t)
		if err != nil {
			log.Fatalf("imgbuild: tag %q: %v", t, err)
		}
		refs[ref] = img
	}
	if err := tarball.MultiRefWriteToFile(out, refs); err != nil {
		log.Fatalf("imgbuild: write %s: %v", out, err)
	}
}

// writeLayer makes the layer's tar, creating parent directories once each.
func writeLayer(ents entries) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	made := map[string]bool{"/": true}
	var mkdirs func(dir string) error
	mkdirs = func(dir string) error {
		if made[dir] {
			return nil
		}
		if err := mkdirs(path.Dir(dir)); err != nil {
			return err
		}
		made[dir] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir[1:] + "/", Mode: 0o755, ModTime: epoch})
	}
	for _, e := range ents {
		if err := mkdirs(path.Dir(e.dst)); err != nil {
			return nil, err
		}
		name := e.dst[1:]
		switch e.kind {
		case "dir":
			made[e.dst] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o1777, ModTime: epoch}); err != nil {
				return nil, err
			}
		case "link":
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: e.arg, Mode: 0o777, ModTime: epoch}); err != nil {
				return nil, err
			}
		case "text":
			body := strings.ReplaceAll(e.arg, `\n`, "\n")
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body)), ModTime: epoch}); err != nil {
				return nil, err
			}
			if _, err := io.WriteString(tw, body); err != nil {
				return nil, err
			}
		case "file":
			data, err := os.ReadFile(e.arg)
			if err != nil {
				return nil, err
			}
			st, err := os.Stat(e.arg)
			if err != nil {
				return nil, err
			}
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: int64(st.Mode().Perm()), Size: int64(len(data)), ModTime: epoch}); err != nil {
				return nil, err
			}
			if _, err := tw.Write(data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
