#!/usr/bin/env bash
# Installs everything nodenet's tests need on a Debian machine, as root, and
# is fast when it is all there already:
#   - network tools the privileged tests drive (iproute2, nftables, iptables,
#     conntrack, ping); flanneld needs iptables too;
#   - what hack/build-node-binaries.sh builds runc and the e2e images from
#     (libseccomp-dev, busybox-static, curl, netcat-openbsd, bind9-dnsutils);
#   - kube-apiserver and etcd built from the Go module proxy into the cache
#     (hack/build-kube-binaries.sh);
#   - flanneld, for the flannel interop tests, built the same way
#     (hack/build-flanneld.sh);
#   - Wine with the ProcessPrng stub for the Windows test leg
#     (hack/setup-wine.sh).
# With --packages-only it installs the Debian packages alone (what `make
# demo` needs besides the kube-apiserver cache).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "install-deps: $*" >&2; }

packages=(iproute2 nftables iptables conntrack iputils-ping)
# The real node (hack/build-node-binaries.sh): runc's seccomp support links
# libseccomp through cgo and pkg-config; the e2e images are made of Debian's
# static busybox plus curl, OpenBSD nc and dig/nslookup with their libraries.
packages+=(gcc libc6-dev pkg-config libseccomp-dev busybox-static curl netcat-openbsd bind9-dnsutils)
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
	if [[ $(id -u) -ne 0 ]]; then
		log "missing packages ${missing[*]}: run as root or install them"
		exit 1
	fi
	log "apt-get install ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [[ ${1:-} == --packages-only ]]; then
	exit 0
fi
bash hack/build-kube-binaries.sh
bash hack/build-flanneld.sh
bash hack/setup-wine.sh
log "ready"
