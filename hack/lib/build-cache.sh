# Shared by the hack/build-*.sh scripts: each builds a binary once from the
# Go module proxy in a scratch module and caches it under
# $NODENET_CACHE (default ~/.cache/nodenet), keyed by version.
# Source it after `set -euo pipefail`; set SCRIPT_NAME and HELP_LINES
# ("2,15p": the script's header comment) first.

ROOT=${NODENET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodenet}

# parse_args sets print_env from --print-env and answers --help.
print_env=false
parse_args() {
	local arg
	for arg in "$@"; do
		case $arg in
		--print-env) print_env=true ;;
		-h | --help)
			sed -n "$HELP_LINES" "$0" | sed 's/^# \{0,1\}//'
			exit 0
			;;
		*)
			echo "unknown argument: $arg" >&2
			exit 2
			;;
		esac
	done
}

log() { echo "$SCRIPT_NAME: $*" >&2; }

# The scratch modules must not see the repo's go.work or vendor settings.
export GOWORK=off GOFLAGS=-mod=mod

scratch=
partial=
cleanup() {
	[[ -n $partial ]] && rm -f "$partial"
	[[ -n $scratch ]] && rm -rf "$scratch"
	return 0
}
trap cleanup EXIT

# new_scratch replaces $scratch with a fresh empty directory.
new_scratch() {
	cleanup
	scratch=$(mktemp -d "${TMPDIR:-/tmp}/nodenet-build.XXXXXX")
}

# install_binary moves a freshly built $1 to $2 atomically, so an
# interrupted build never leaves a half-written binary at the final path.
install_binary() {
	local src=$1 dst=$2
	mkdir -p "$(dirname "$dst")"
	partial=$dst.tmp.$$
	cp "$src" "$partial"
	chmod 0755 "$partial"
	mv -f "$partial" "$dst"
	partial=
}

# take_build_lock serialises every build script (one lock for all) so two
# test jobs don't compile the same thing.
take_build_lock() {
	mkdir -p "$ROOT"
	exec 9>"$ROOT/.build.lock"
	if command -v flock >/dev/null 2>&1; then
		flock 9
	fi
}
