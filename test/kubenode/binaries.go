package kubenode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Environment variables naming the node binaries, as
// hack/build-node-binaries.sh --print-env prints them.
const (
	EnvKubelet               = "NODENET_KUBELET"
	EnvKubeControllerManager = "NODENET_KUBE_CONTROLLER_MANAGER"
	EnvKubeScheduler         = "NODENET_KUBE_SCHEDULER"
	EnvContainerd            = "NODENET_CONTAINERD"
	EnvContainerdShim        = "NODENET_CONTAINERD_SHIM"
	EnvCtr                   = "NODENET_CTR"
	EnvRunc                  = "NODENET_RUNC"
	EnvCrictl                = "NODENET_CRICTL"
	EnvCNIPluginsDir         = "NODENET_CNI_PLUGINS_DIR"
	EnvImagesDir             = "NODENET_IMAGES_DIR"
)

// BuildHint tells a human how to get the binaries.
const BuildHint = "build them with hack/build-node-binaries.sh and export what " +
	"`hack/build-node-binaries.sh --print-env` prints (make test does both)"

// ErrBinaryMissing is wrapped by errors about binaries that are not there.
var ErrBinaryMissing = errors.New("binary missing")

// Binaries are the node's executables and files, by absolute path.
type Binaries struct {
	Kubelet               string
	KubeControllerManager string
	KubeScheduler         string
	Containerd            string
	ContainerdShim        string
	Ctr                   string
	Runc                  string
	Crictl                string
	// CNIPluginsDir holds the reference plugins (loopback).
	CNIPluginsDir string
	// ImagesDir holds image archives and images.txt, one "archive ref"
	// a line.
	ImagesDir string
}

// FindBinaries reads the binaries from the environment and checks that
// each exists.
func FindBinaries() (Binaries, error) {
	var b Binaries
	var errs []error
	for _, f := range []struct {
		env string
		to  *string
		dir bool
	}{
		{EnvKubelet, &b.Kubelet, false},
		{EnvKubeControllerManager, &b.KubeControllerManager, false},
		{EnvKubeScheduler, &b.KubeScheduler, false},
		{EnvContainerd, &b.Containerd, false},
		{EnvContainerdShim, &b.ContainerdShim, false},
		{EnvCtr, &b.Ctr, false},
		{EnvRunc, &b.Runc, false},
		{EnvCrictl, &b.Crictl, false},
		{EnvCNIPluginsDir, &b.CNIPluginsDir, true},
		{EnvImagesDir, &b.ImagesDir, true},
	} {
		path := os.Getenv(f.env)
		if path == "" {
			errs = append(errs, fmt.Errorf("%s not set: %w", f.env, ErrBinaryMissing))
			continue
		}
		info, err := os.Stat(path)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s=%s: %w: %w", f.env, path, ErrBinaryMissing, err))
		case info.IsDir() != f.dir:
			errs = append(errs, fmt.Errorf("%s=%s: wrong kind of file: %w", f.env, path, ErrBinaryMissing))
		}
		*f.to, _ = filepath.Abs(path)
	}
	return b, errors.Join(errs...)
}

// Image is one image archive and the reference it is imported as.
type Image struct {
	Archive string
	Ref     string
}

// Images reads ImagesDir/images.txt.
func (b Binaries) Images() ([]Image, error) {
	data, err := os.ReadFile(filepath.Join(b.ImagesDir, "images.txt"))
	if err != nil {
		return nil, err
	}
	return parseImages(b.ImagesDir, string(data))
}

// parseImages parses images.txt: "archive ref" a line, archives relative
// to dir; blank lines and # comments are skipped.
func parseImages(dir, text string) ([]Image, error) {
	var out []Image
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("images.txt line %d: want \"archive ref\", got %q", i+1, line)
		}
		archive := f[0]
		if !filepath.IsAbs(archive) {
			archive = filepath.Join(dir, archive)
		}
		out = append(out, Image{Archive: archive, Ref: f[1]})
	}
	if len(out) == 0 {
		return nil, errors.New("images.txt lists no image")
	}
	return out, nil
}

// PauseImage is the first image whose reference names pause, the
// sandbox image containerd is told to use.
func PauseImage(images []Image) (string, error) {
	for _, im := range images {
		name := im.Ref
		if i := strings.LastIndex(name, "/"); i >= 0 {
			name = name[i+1:]
		}
		if strings.HasPrefix(name, "pause:") || strings.HasPrefix(name, "pause@") {
			return im.Ref, nil
		}
	}
	return "", errors.New("images.txt has no pause image")
}

// RequireBinaries skips t when a binary is missing, except under CI=true,
// where it fails t: CI must never pass by skipping.
func RequireBinaries(t testing.TB) Binaries {
	t.Helper()
	b, err := FindBinaries()
	switch {
	case err == nil:
	case os.Getenv("CI") == "true":
		t.Fatalf("node binaries missing under CI=true: %v; %s", err, BuildHint)
	case errors.Is(err, ErrBinaryMissing):
		t.Skipf("skipping: %v; %s", err, BuildHint)
	default:
		t.Fatalf("find node binaries: %v", err)
	}
	return b
}

// EnvKubectl names kubectl, as hack/build-kubectl.sh --print-env prints
// it; the installed mode (Options.Install) applies deploy/ with it.
const EnvKubectl = "NODENET_KUBECTL"

// RequireKubectl returns kubectl's path, skipping t when it is not built
// (failing it under CI=true, like RequireBinaries).
func RequireKubectl(t testing.TB) string {
	t.Helper()
	path := os.Getenv(EnvKubectl)
	if path != "" {
		if _, err := os.Stat(path); err == nil {
			return path
		}
	}
	msg := fmt.Sprintf("%s not set or missing (%q): build it with hack/build-kubectl.sh and export what --print-env prints", EnvKubectl, path)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}
