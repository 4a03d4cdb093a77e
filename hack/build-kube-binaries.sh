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
# Staging modules (k8s.io/api, ...) are tagged v0.<minor>.<patch>.
STAGING_VERSION=v0.${KUBE_VERSION#v1.}
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

# staging_modules prints the k8s.io modules that kubernetes' own go.mod
# replaces with its staging tree; reading them from the real go.mod keeps the
# list from drifting between releases.
staging_modules() {
	local gomod=$1
	awk '
		/^replace[ \t]*\(/ { inblock = 1; next }
		inblock && /^\)/ { inblock = 0; next }
		inblock && $1 ~ /^k8s\.io\// && $2 == "=>" { print $1 }
		/^replace[ \t]+k8s\.io\// && $3 == "=>" { print $2 }
	' "$gomod" | grep -vx 'k8s.io/sample-cli-plugin' | sort -u
}

build_kube_apiserver() {
	new_scratch
	local start=$SECONDS
	log "building kube-apiserver $KUBE_VERSION in $scratch"
	log "downloading k8s.io/kubernetes@$KUBE_VERSION"
	local dir
	dir=$(cd "$scratch" && go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" |
		awk -F'"' '$2 == "Dir" { print $4 }')
	if [[ -z $dir || ! -f $dir/go.mod ]]; then
		log "cannot find k8s.io/kubernetes@$KUBE_VERSION in the module cache"
		return 1
	fi
	local mods
	mods=$(staging_modules "$dir/go.mod")
	if [[ -z $mods ]]; then
		log "no staging replace lines found in $dir/go.mod"
		return 1
	fi
	log "pinning $(wc -l <<<"$mods") staging modules to $STAGING_VERSION"
	local now
	now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	local minor=${KUBE_VERSION#v1.}
	minor=${minor%%.*}
	local ldflags="-s -w"
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION"
		ldflags+=" -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
		ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$now"
	done
	(
		cd "$scratch"
		go mod init nodenet.local/build/kube-apiserver >/dev/null 2>&1
		local args=(-require="k8s.io/kubernetes@$KUBE_VERSION")
		local m
		for m in $mods; do
			args+=(-replace="$m=$m@$STAGING_VERSION")
		done
		go mod edit "${args[@]}"
		# A build-tagged blank import lets `go mod tidy` resolve the
		# command's dependency graph; importing a main package is fine there.
		cat >tools.go <<'EOF'
//go:build tools

package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
EOF
		log "resolving kube-apiserver dependencies"
		go mod tidy
		log "compiling kube-apiserver (several minutes cold)"
		go build -trimpath -ldflags "$ldflags" -o kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
	)
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
