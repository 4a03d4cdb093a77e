#!/usr/bin/env bash
# Builds, once, the real kube-apiserver and etcd that integration tests run
# (test/apiserver). Both come from the Go module proxy through scratch modules
# in temp dirs and land in a cache outside the repo, keyed by version:
#
#   $ROOT/kube-v1.37.1/kube-apiserver
#   $ROOT/etcd-v3.7.3/etcd
#
# where ROOT=${NODENET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodenet}.
#
# Usage: hack/build-kube-binaries.sh [--print-env]
#   --print-env  after building, print NODENET_KUBE_APISERVER=... and
#                NODENET_ETCD=... (progress goes to stderr, so
#                `eval "$(hack/build-kube-binaries.sh --print-env)"` works).
set -euo pipefail

SCRIPT_NAME=build-kube-binaries
HELP_LINES=2,14p
# shellcheck source=hack/lib/build-cache.sh
source "$(dirname "$0")/lib/build-cache.sh"

KUBE_VERSION=v1.37.1
ETCD_VERSION=v3.7.3

KUBE_APISERVER=$ROOT/kube-$KUBE_VERSION/kube-apiserver
ETCD=$ROOT/etcd-$ETCD_VERSION/etcd

parse_args "$@"

# works reports whether $1 is an executable that answers --version; a binary
# that does not is rebuilt.
works() { [[ -x $1 ]] && "$1" --version >/dev/null 2>&1; }

build_etcd() {
	new_scratch
	local start=$SECONDS
	log "building etcd $ETCD_VERSION in $scratch"
	(
		cd "$scratch"
		go mod init nodenet.local/build/etcd >/dev/null 2>&1
		cat >main.go <<'EOF'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
		go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
		go mod tidy
		go build -trimpath -ldflags "-s -w" -o etcd .
	)
	install_binary "$scratch/etcd" "$ETCD"
	log "etcd built in $((SECONDS - start))s: $ETCD"
}

build_kube_apiserver() {
	new_scratch
	local start=$SECONDS
	log "building kube-apiserver $KUBE_VERSION in $scratch"
	build_kube_command kube-apiserver "$KUBE_VERSION"
	install_binary "$scratch/kube-apiserver" "$KUBE_APISERVER"
	log "kube-apiserver built in $((SECONDS - start))s: $KUBE_APISERVER"
}

take_build_lock

if works "$ETCD"; then
	log "etcd $ETCD_VERSION cached: $ETCD"
else
	build_etcd
fi
if works "$KUBE_APISERVER"; then
	log "kube-apiserver $KUBE_VERSION cached: $KUBE_APISERVER"
else
	build_kube_apiserver
fi

if $print_env; then
	echo "NODENET_KUBE_APISERVER=$KUBE_APISERVER"
	echo "NODENET_ETCD=$ETCD"
fi
