#!/usr/bin/env bash
# Prepares Wine so Windows builds of nodenet's tests run on this Linux host:
#
#	bash hack/setup-wine.sh
#	GOOS=windows go test -exec "$PWD/hack/wine-exec.sh" ./hns/
#
# Installs wine64 and the mingw-w64 compiler if missing, initializes a
# 64-bit prefix at ${WINEPREFIX:-$HOME/.cache/nodenet/wine} and builds the
# stub DLLs of hack/wine/ into its system32:
#   - bcryptprimitives.dll: Go binaries import ProcessPrng from it and
#     Wine 8 (Debian 12) has none, so without it nothing Go starts;
#   - computenetwork.dll: a stand-in HNS whose every call fails with
#     $NODENET_FAKE_HCN_HRESULT (0x8007007E when unset), so tests can see
#     chosen HNS errors come through hcn.
# Idempotent; a run with nothing to do takes well under a second.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export WINEPREFIX="${WINEPREFIX:-$HOME/.cache/nodenet/wine}"
export WINEDEBUG="${WINEDEBUG:--all}"
export WINEDLLOVERRIDES="mscoree,mshtml="

log() { echo "setup-wine: $*" >&2; }

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'ok installed'; }

missing=()
for pkg in wine64 gcc-mingw-w64-x86-64-win32; do
	installed "$pkg" || missing+=("$pkg")
done
if ((${#missing[@]})); then
	sudo=()
	[[ $(id -u) -eq 0 ]] || sudo=(sudo)
	log "installing ${missing[*]}"
	"${sudo[@]}" apt-get update -qq
	# Recommends (fonts, GL, audio, ...) are not needed to run console
	# test binaries and would triple the download.
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq \
		--no-install-recommends "${missing[@]}" >/dev/null
fi

if [[ ! -f $WINEPREFIX/system.reg ]]; then
	log "initializing prefix $WINEPREFIX"
	mkdir -p "$WINEPREFIX"
	if ! "$here/wine-exec.sh" wineboot -i >/dev/null 2>&1; then
		log "wineboot -i failed; rerun with WINEDEBUG=err+all to see why"
		exit 1
	fi
	# wineboot returns before wineserver has written the registry out.
	for ws in wineserver /usr/lib/wine/wineserver64 /usr/lib/wine/wineserver; do
		if command -v "$ws" >/dev/null 2>&1; then
			"$ws" -w
			break
		fi
	done
fi

# Each hack/wine/NAME.c (+ NAME.def for its exports) becomes NAME.dll in
# system32; rebuilt only when its source is newer.
sys32="$WINEPREFIX/drive_c/windows/system32"
mkdir -p "$sys32"
for src in "$here"/wine/*.c; do
	def="${src%.c}.def"
	dll="$sys32/$(basename "${src%.c}").dll"
	if [[ ! -f $dll || $src -nt $dll || $def -nt $dll ]]; then
		log "building $dll"
		x86_64-w64-mingw32-gcc -Wall -Wextra -Werror -shared -O2 -s \
			-o "$dll.tmp" "$src" "$def" -ladvapi32
		mv "$dll.tmp" "$dll"
	fi
done

echo "WINEPREFIX=$WINEPREFIX"
echo "# then: GOOS=windows go test -exec \"$here/wine-exec.sh\" ./hns/"
