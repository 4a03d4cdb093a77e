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

# take_build_lock serialises the build scripts so two test jobs don't compile
# the same thing. Scripts whose outputs don't overlap may pass their own lock
# name ($1) so they can build side by side; the default is the shared lock.
take_build_lock() {
	mkdir -p "$ROOT"
	exec 9>"$ROOT/.${1:-build}.lock"
	if command -v flock >/dev/null 2>&1; then
		flock 9
	fi
}

# kube_module turns $scratch into a module that can build packages of
# k8s.io/kubernetes at $1 (v1.x.y); the rest of the arguments are the import
# paths it will build, which `go mod tidy` resolves. k8s.io/kubernetes can't be
# required on its own: every staging module its go.mod replaces with ./staging
# must be pinned to v0.x.y. The list is read from the release's own go.mod so
# it can't drift between releases. It sets KUBE_LDFLAGS to the version
# variables clients parse (kubectl refuses a binary without them).
KUBE_LDFLAGS=
kube_module() {
	local version=$1
	shift
	local staging=v0.${version#v1.}
	log "downloading k8s.io/kubernetes@$version"
	local dir
	dir=$(cd "$scratch" && go mod download -json "k8s.io/kubernetes@$version" |
		awk -F'"' '$2 == "Dir" { print $4 }')
	if [[ -z $dir || ! -f $dir/go.mod ]]; then
		log "cannot find k8s.io/kubernetes@$version in the module cache"
		return 1
	fi
	local mods
	mods=$(awk '
		/^replace[ \t]*\(/ { inblock = 1; next }
		inblock && /^\)/ { inblock = 0; next }
		inblock && $1 ~ /^k8s\.io\// && $2 == "=>" { print $1 }
		/^replace[ \t]+k8s\.io\// && $3 == "=>" { print $2 }
	' "$dir/go.mod" | grep -vx 'k8s.io/sample-cli-plugin' | sort -u)
	if [[ -z $mods ]]; then
		log "no staging replace lines found in $dir/go.mod"
		return 1
	fi
	log "pinning $(wc -l <<<"$mods") staging modules to $staging"
	local now minor
	now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	minor=${version#v1.}
	minor=${minor%%.*}
	KUBE_LDFLAGS="-s -w"
	local pkg
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		KUBE_LDFLAGS+=" -X $pkg.gitVersion=$version"
		KUBE_LDFLAGS+=" -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
		KUBE_LDFLAGS+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$now"
	done
	(
		cd "$scratch"
		go mod init "nodenet.local/build/kube" >/dev/null 2>&1
		local args=(-require="k8s.io/kubernetes@$version") m
		for m in $mods; do
			args+=(-replace="$m=$m@$staging")
		done
		go mod edit "${args[@]}"
		# A build-tagged blank import lets `go mod tidy` resolve the
		# packages' dependency graph; importing main packages is fine there.
		{
			printf '//go:build tools\n\npackage tools\n\nimport (\n'
			printf '\t_ "%s"\n' "$@"
			printf ')\n'
		} >tools.go
		log "resolving dependencies of $*"
		go mod tidy
	)
}

# build_kube_command builds k8s.io/kubernetes/cmd/$1 at $2 (v1.x.y) into
# $scratch/$1.
build_kube_command() {
	local cmd=$1 version=$2
	kube_module "$version" "k8s.io/kubernetes/cmd/$cmd"
	log "compiling $cmd (minutes cold)"
	(cd "$scratch" && go build -trimpath -ldflags "$KUBE_LDFLAGS" -o "$cmd" "k8s.io/kubernetes/cmd/$cmd")
}
