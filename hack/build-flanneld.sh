#!/usr/bin/env bash
# Builds, once, the real flanneld that the flannel interop tests run
# (test/e2e). It comes from the Go module proxy through a scratch module in a
# temp dir and lands in the cache outside the repo, keyed by version:
#
#   $ROOT/flanneld-v0.28.4/flanneld
#
# where ROOT=${NODENET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodenet}.
# A cold build takes about two minutes on two cores.
#
# Usage: hack/build-flanneld.sh [--print-env]
#   --print-env  after building, print NODENET_FLANNELD=... (progress goes
#                to stderr, so `eval "$(hack/build-flanneld.sh --print-env)"`
#                works).
set -euo pipefail

SCRIPT_NAME=build-flanneld
HELP_LINES=2,15p
# shellcheck source=hack/lib/build-cache.sh
source "$(dirname "$0")/lib/build-cache.sh"

# Keep in step with test/e2e's flanneldVersion.
FLANNEL_VERSION=v0.28.4
# flannel pins tencentcloud-sdk-go/tencentcloud/common v1.3.79, which the
# module proxy no longer serves; v1.3.103 is the closest one that resolves.
TENCENT_COMMON=github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/common
TENCENT_COMMON_VERSION=v1.3.103

FLANNELD=$ROOT/flanneld-$FLANNEL_VERSION/flanneld

parse_args "$@"

# works reports whether $1 is an executable that answers --version with the
# wanted version; anything else is rebuilt.
works() { [[ -x $1 ]] && [[ $("$1" --version 2>&1) == "$FLANNEL_VERSION" ]]; }

build_flanneld() {
	new_scratch
	local start=$SECONDS
	log "building flanneld $FLANNEL_VERSION in $scratch"
	(
		cd "$scratch"
		go mod init nodenet.local/build/flanneld >/dev/null 2>&1
		go mod edit \
			-require="github.com/flannel-io/flannel@$FLANNEL_VERSION" \
			-replace="$TENCENT_COMMON=$TENCENT_COMMON@$TENCENT_COMMON_VERSION"
		# A build-tagged blank import lets `go mod tidy` resolve the
		# command's dependency graph; importing a main package is fine there.
		cat >tools.go <<'EOF'
//go:build tools

package tools

import _ "github.com/flannel-io/flannel"
EOF
		log "resolving flanneld dependencies"
		go mod tidy
		log "compiling flanneld (about two minutes cold)"
		go build -trimpath \
			-ldflags "-s -w -X github.com/flannel-io/flannel/pkg/version.Version=$FLANNEL_VERSION" \
			-o flanneld github.com/flannel-io/flannel
	)
	install_binary "$scratch/flanneld" "$FLANNELD"
	log "flanneld built in $((SECONDS - start))s: $FLANNELD"
}

take_build_lock

if works "$FLANNELD"; then
	log "flanneld $FLANNEL_VERSION cached: $FLANNELD"
else
	build_flanneld
fi

if $print_env; then
	echo "NODENET_FLANNELD=$FLANNELD"
fi
