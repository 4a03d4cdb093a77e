//go:build tools

// Package tools pins modules that the repository's build tooling and
// tests import, while they are being wired in.
package tools

import (
	_ "github.com/google/go-containerregistry/pkg/v1/layout"
	_ "github.com/google/go-containerregistry/pkg/v1/mutate"
	_ "github.com/google/go-containerregistry/pkg/v1/empty"
	_ "github.com/google/go-containerregistry/pkg/v1/tarball"
	_ "k8s.io/cri-api/pkg/apis/runtime/v1"
	_ "sigs.k8s.io/kustomize/api/krusty"
	_ "sigs.k8s.io/kustomize/kyaml/filesys"
	_ "google.golang.org/grpc"
	_ "google.golang.org/grpc/credentials/insecure"
)
