#!/usr/bin/env bash
# Builds, once, the upstream end-to-end suite that judges a nodenet node
# (make conformance): e2e.test from k8s.io/kubernetes/test/e2e at the
# apiserver's version, the ginkgo runner at the version that release
# requires, and CoreDNS for the cluster DNS the DNS tests query. All come from
# the Go module proxy through scratch modules in temp dirs and land in a cache
# outside the repo, keyed by version:
#
#   $ROOT/kube-v1.37.1/e2e.test
#   $ROOT/ginkgo-v2.32.0/ginkgo
#   $ROOT/coredns-v1.14.6/coredns
#
# where ROOT=${NODENET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodenet}.
# Cold build times, measured on two cores with other helpers' builds and
# tests running (load average 15-25) and the node binaries building at the
# same time: e2e.test 1812 s; CoreDNS + ginkgo about 20 min cold (the same
# `go install` run by hand first; the script then linked them in 28 s and 7 s
# from the build cache). Everything cached: under a second.
#
# Usage: hack/build-e2e.sh [--print-env]
#   --print-env  after building, print NODENET_E2E_TEST=...,
#                NODENET_GINKGO=... and NODENET_COREDNS=... (progress goes to
#                stderr, so `eval "$(hack/build-e2e.sh --print-env)"` works).
set -euo pipefail

SCRIPT_NAME=build-e2e
HELP_LINES=2,23p
# shellcheck source=hack/lib/build-cache.sh
source "$(dirname "$0")/lib/build-cache.sh"

# The kube-apiserver's version (hack/build-kube-binaries.sh).
KUBE_VERSION=v1.37.1
# What k8s.io/kubernetes v1.37.1's go.mod requires: the runner and the
# suite's ginkgo library must agree.
GINKGO_VERSION=v2.32.0
# The CoreDNS kubeadm v1.37.1 deploys (cmd/kubeadm/app/constants,
# CoreDNSVersion).
COREDNS_VERSION=v1.14.6

E2E_TEST=$ROOT/kube-$KUBE_VERSION/e2e.test
GINKGO=$ROOT/ginkgo-$GINKGO_VERSION/ginkgo
COREDNS=$ROOT/coredns-$COREDNS_VERSION/coredns

parse_args "$@"

# e2e.test answers --help only after parsing its flags; a binary that can't
# is rebuilt.
e2e_works() { [[ -x $E2E_TEST ]] && { "$E2E_TEST" --help 2>&1 || true; } | grep -- '-kubeconfig' >/dev/null; }
ginkgo_works() { [[ -x $GINKGO ]] && { "$GINKGO" version 2>&1 || true; } | grep -F "${GINKGO_VERSION#v}" >/dev/null; }
coredns_works() { [[ -x $COREDNS ]] && { "$COREDNS" -version 2>&1 || true; } | grep -F "${COREDNS_VERSION#v}" >/dev/null; }

build_e2e_test() {
	new_scratch
	local start=$SECONDS
	log "building e2e.test $KUBE_VERSION in $scratch"
	local dir pkgs
	dir=$(cd "$scratch" && go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" |
		awk -F'"' '$2 == "Dir" { print $4 }')
	# `go mod tidy` doesn't follow a dependency's test files, so the
	# packages e2e_test.go imports go into tools.go themselves.
	pkgs=$(sed -n '/^import (/,/^)/p' "$dir/test/e2e/e2e_test.go" |
		grep -oE '"[a-z0-9.-]+\.[a-z]+/[^"]+"' | tr -d '"' | sort -u)
	# shellcheck disable=SC2086 # one import path per word
	kube_module "$KUBE_VERSION" k8s.io/kubernetes/test/e2e $pkgs
	log "compiling e2e.test (many minutes cold)"
	(cd "$scratch" && go test -c -trimpath -ldflags "$KUBE_LDFLAGS" -o e2e.test k8s.io/kubernetes/test/e2e)
	install_binary "$scratch/e2e.test" "$E2E_TEST"
	log "e2e.test built in $((SECONDS - start))s: $E2E_TEST"
}

# build_tool NAME MODULE_PKG VERSION DEST builds a main package with
# `go install` from the module proxy (neither needs a replace block).
build_tool() {
	local name=$1 pkg=$2 version=$3 dest=$4
	new_scratch
	local start=$SECONDS
	log "building $name $version in $scratch"
	(cd "$scratch" && GOBIN=$scratch go install -trimpath -ldflags "-s -w" "$pkg@$version")
	install_binary "$scratch/$name" "$dest"
	log "$name built in $((SECONDS - start))s: $dest"
}

build_ginkgo() { build_tool ginkgo github.com/onsi/ginkgo/v2/ginkgo "$GINKGO_VERSION" "$GINKGO"; }
build_coredns() { build_tool coredns github.com/coredns/coredns "$COREDNS_VERSION" "$COREDNS"; }

# Not the shared lock: e2e.test, ginkgo and coredns are made by no other
# script, so this can build while kube-apiserver does.
take_build_lock build-e2e

if e2e_works; then
	log "e2e.test $KUBE_VERSION cached: $E2E_TEST"
else
	build_e2e_test
fi
if ginkgo_works; then
	log "ginkgo $GINKGO_VERSION cached: $GINKGO"
else
	build_ginkgo
fi
if coredns_works; then
	log "coredns $COREDNS_VERSION cached: $COREDNS"
else
	build_coredns
fi

if $print_env; then
	echo "NODENET_E2E_TEST=$E2E_TEST"
	echo "NODENET_GINKGO=$GINKGO"
	echo "NODENET_COREDNS=$COREDNS"
fi
