package apiserver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Versions built by hack/build-kube-binaries.sh; keep the two in step.
const (
	KubeVersion = "v1.37.1"
	EtcdVersion = "v3.7.3"
)

// Environment variables that name the binaries explicitly.
const (
	EnvKubeAPIServer = "NODENET_KUBE_APISERVER"
	EnvEtcd          = "NODENET_ETCD"
)

// BuildHint tells a human how to get the binaries.
const BuildHint = "build them with hack/build-kube-binaries.sh (or set " +
	EnvKubeAPIServer + " and " + EnvEtcd + ")"

// ErrBinaryMissing is wrapped by errors about binaries that are not there.
var ErrBinaryMissing = errors.New("binary missing")

// CacheRoot is where hack/build-kube-binaries.sh keeps its builds.
func CacheRoot() (string, error) {
	if dir := os.Getenv("NODENET_CACHE"); dir != "" {
		return dir, nil
	}
	if dir := os.Getenv("XDG_CACHE_HOME"); dir != "" {
		return filepath.Join(dir, "nodenet"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("locate build cache: %w", err)
	}
	return filepath.Join(home, ".cache", "nodenet"), nil
}

// binaries are the resolved executable paths.
type binaries struct {
	kubeAPIServer string
	etcd          string
}

// findBinaries resolves each binary from Options, then the environment, then
// the build cache, and checks that it exists.
func findBinaries(opts Options) (binaries, error) {
	root, rootErr := CacheRoot()
	kube, err := findBinary(opts.KubeAPIServer, EnvKubeAPIServer, root, rootErr,
		"kube-"+KubeVersion, "kube-apiserver")
	if err != nil {
		return binaries{}, err
	}
	etcd, err := findBinary(opts.Etcd, EnvEtcd, root, rootErr,
		"etcd-"+EtcdVersion, "etcd")
	if err != nil {
		return binaries{}, err
	}
	return binaries{kubeAPIServer: kube, etcd: etcd}, nil
}

func findBinary(explicit, env, root string, rootErr error, sub, name string) (string, error) {
	path := explicit
	if path == "" {
		path = os.Getenv(env)
	}
	if path == "" {
		if rootErr != nil {
			return "", fmt.Errorf("%s: %w: %w", name, ErrBinaryMissing, rootErr)
		}
		path = filepath.Join(root, sub, name)
	}
	info, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("%s at %s: %w: %w", name, path, ErrBinaryMissing, err)
	}
	if info.IsDir() {
		return "", fmt.Errorf("%s at %s is a directory: %w", name, path, ErrBinaryMissing)
	}
	return path, nil
}
