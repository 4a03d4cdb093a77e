#!/usr/bin/env bash
# Builds, once, the real kube-proxy that bench/proxy measures nodenet's
# service proxy against. It comes from the Go module proxy through a scratch
# module in a temp dir and lands in a cache outside the repo, keyed by
# version, next to the kube-apiserver hack/build-kube-binaries.sh builds:
#
#   $ROOT/kube-v1.37.1/kube-proxy
#
# where ROOT=${NODENET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodenet}.
#
# Usage: hack/build-kube-proxy.sh [--print-env]
#   --print-env  after building, print NODENET_KUBE_PROXY=... (progress goes
#                to stderr, so `eval "$(hack/build-kube-proxy.sh --print-env)"`
#                works).
set -euo pipefail

SCRIPT_NAME=build-kube-proxy
HELP_LINES=2,14p
# shellcheck source=hack/lib/build-cache.sh
source "$(dirname "$0")/lib/build-cache.sh"

KUBE_VERSION=v1.37.1
KUBE_PROXY=$ROOT/kube-$KUBE_VERSION/kube-proxy

parse_args "$@"

take_build_lock

if [[ -x $KUBE_PROXY ]] && "$KUBE_PROXY" --version >/dev/null 2>&1; then
	log "kube-proxy $KUBE_VERSION cached: $KUBE_PROXY"
else
	new_scratch
	start=$SECONDS
	log "building kube-proxy $KUBE_VERSION in $scratch"
	build_kube_command kube-proxy "$KUBE_VERSION"
	install_binary "$scratch/kube-proxy" "$KUBE_PROXY"
	log "kube-proxy built in $((SECONDS - start))s: $KUBE_PROXY"
fi

if $print_env; then
	echo "NODENET_KUBE_PROXY=$KUBE_PROXY"
fi
