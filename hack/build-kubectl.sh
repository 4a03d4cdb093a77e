#!/usr/bin/env bash
# Builds, once, kubectl at the apiserver's version: the upstream e2e suite
# (make conformance) runs `kubectl exec` for its in-pod probes
# (e2eoutput.RunHostCmd). From the Go module proxy like kube-apiserver
# (hack/lib/build-cache.sh build_kube_command), cached outside the repo:
#
#   $ROOT/kube-v1.37.1/kubectl
#
# where ROOT=${NODENET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodenet}.
#
# Usage: hack/build-kubectl.sh [--print-env]
#   --print-env  after building, print NODENET_KUBECTL=... (progress goes
#                to stderr).
set -euo pipefail

SCRIPT_NAME=build-kubectl
HELP_LINES=2,14p
# shellcheck source=hack/lib/build-cache.sh
source "$(dirname "$0")/lib/build-cache.sh"

KUBE_VERSION=v1.37.1
KUBECTL=$ROOT/kube-$KUBE_VERSION/kubectl

parse_args "$@"
take_build_lock

if [[ -x $KUBECTL ]] && "$KUBECTL" version --client >/dev/null 2>&1; then
	log "kubectl $KUBE_VERSION cached: $KUBECTL"
else
	new_scratch
	start=$SECONDS
	log "building kubectl $KUBE_VERSION in $scratch"
	build_kube_command kubectl "$KUBE_VERSION"
	install_binary "$scratch/kubectl" "$KUBECTL"
	log "kubectl built in $((SECONDS - start))s: $KUBECTL"
fi

if $print_env; then
	echo "NODENET_KUBECTL=$KUBECTL"
fi
