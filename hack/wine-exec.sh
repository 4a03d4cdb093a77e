#!/usr/bin/env bash
# Runs a Windows binary under Wine in nodenet's prefix; made for
# `GOOS=windows go test -exec "$PWD/hack/wine-exec.sh"`. Run
# hack/setup-wine.sh once first: it installs Wine and the
# bcryptprimitives.dll stub Go binaries need.
set -euo pipefail

export WINEPREFIX="${WINEPREFIX:-$HOME/.cache/nodenet/wine}"
# Wine's debug chatter would land in the test output.
export WINEDEBUG="${WINEDEBUG:--all}"
# No Mono/Gecko install prompts if Wine ever has to (re)initialize the prefix.
export WINEDLLOVERRIDES="${WINEDLLOVERRIDES:-mscoree,mshtml=}"

# Debian installs the 64-bit loader as wine64 (package wine64) and the
# wine wrapper only with package wine; use whichever exists.
for w in wine64 /usr/lib/wine/wine64 wine; do
	if command -v "$w" >/dev/null 2>&1; then
		exec "$w" "$@"
	fi
done
echo "wine-exec.sh: Wine is not installed; run hack/setup-wine.sh" >&2
exit 127
