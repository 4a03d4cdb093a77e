#!/usr/bin/env bash
# Builds, once, what a real Kubernetes node runs in the conformance harness
# (test/kubenode): kubelet, kube-controller-manager and kube-scheduler at the
# apiserver's version, containerd 2.x with its runc shim and ctr, runc,
# crictl, the loopback/portmap/host-local CNI plugins, and the images the
# sig-network conformance tests run (pause, agnhost, busybox,
# glibc-dns-testing, an nginx stand-in) as archives for
# `ctr -n k8s.io images import`. All of it comes from the Go module proxy and
# Debian packages (libseccomp-dev, busybox-static, curl, netcat-openbsd,
# bind9-dnsutils) through scratch modules in temp dirs and lands in a cache
# outside the repo, keyed by version:
#
#   $ROOT/kube-v1.37.1/{kubelet,kube-controller-manager,kube-scheduler,agnhost}
#   $ROOT/containerd-v2.2.0/{containerd,containerd-shim-runc-v2,ctr}
#   $ROOT/runc-v1.3.6/runc  $ROOT/crictl-v1.37.0/crictl
#   $ROOT/cni-plugins-v1.9.1/{loopback,portmap,host-local}
#   $ROOT/images-<hash of the inputs>/{*.tar,images.txt}
#
# where ROOT=${NODENET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodenet}.
# images.txt has one "archive-file image-ref" line per ref;
# docs/conformance-build.md says what each image holds.
# Cold build times, measured on two cores with other helpers' builds and
# tests running (load average 15-25) and kube-apiserver and e2e.test building
# at the same time: containerd+ctr+shim 483 s, runc 73 s, crictl 199 s, CNI
# plugins 50 s, kubelet+controller-manager+scheduler+agnhost 2231 s, images
# 13 s; 38 min in all. Everything cached: under a second.
#
# Usage: hack/build-node-binaries.sh [--print-env]
#   --print-env  after building, print NODENET_KUBELET=... and the rest
#                (progress goes to stderr, so
#                `eval "$(hack/build-node-binaries.sh --print-env)"` works).
set -euo pipefail

SCRIPT_NAME=build-node-binaries
HELP_LINES=2,31p
# shellcheck source=hack/lib/build-cache.sh
source "$(dirname "$0")/lib/build-cache.sh"
HACK=$(cd "$(dirname "$0")" && pwd)

# The kube-apiserver's version (hack/build-kube-binaries.sh): kubelet must not
# be newer than the apiserver.
KUBE_VERSION=v1.37.1
# kubelet >= 1.36 needs containerd >= 2.0 (DESIGN.md §8).
CONTAINERD_VERSION=v2.2.0
RUNC_VERSION=v1.3.6
CRICTL_VERSION=v1.37.0
CNI_PLUGINS_VERSION=v1.9.1
GGCR_VERSION=v0.22.1

# Image refs. containerd's CRI plugin defaults its sandbox image to pause
# 3.10.1 (internal/cri/config/config.go, DefaultSandboxImage); the e2e
# framework of k8s.io/kubernetes v1.37.1 names the rest
# (test/utils/image/manifest.go): pause 3.10.2, agnhost 2.66.1, busybox
# 1.37.0-2, glibc-dns-testing 2.1.1 and nginx 1.27.0-2/1.28.0-2, the ones
# test/e2e/network's and common/network's conformance tests run.
PAUSE_REFS=(registry.k8s.io/pause:3.10.1 registry.k8s.io/pause:3.10.2)
AGNHOST_REF=registry.k8s.io/e2e-test-images/agnhost:2.66.1
BUSYBOX_REF=registry.k8s.io/e2e-test-images/busybox:1.37.0-2
GLIBC_DNS_REF=registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1
NGINX_REFS=(registry.k8s.io/e2e-test-images/nginx:1.27.0-2 registry.k8s.io/e2e-test-images/nginx:1.28.0-2)

KUBE_DIR=$ROOT/kube-$KUBE_VERSION
KUBE_NODE_CMDS=(kubelet kube-controller-manager kube-scheduler)
AGNHOST=$KUBE_DIR/agnhost
CONTAINERD_DIR=$ROOT/containerd-$CONTAINERD_VERSION
RUNC=$ROOT/runc-$RUNC_VERSION/runc
CRICTL=$ROOT/crictl-$CRICTL_VERSION/crictl
CNI_DIR=$ROOT/cni-plugins-$CNI_PLUGINS_VERSION
CNI_PLUGINS=(loopback portmap host-local)

parse_args "$@"

# version_is reports whether running "$1 $2" prints something containing $3;
# a binary that does not is rebuilt.
version_is() { [[ -x $1 ]] && { "$1" "$2" 2>&1 || true; } | grep -F -- "$3" >/dev/null; }

# kube_built reports whether every kube binary this script makes is there.
kube_built() {
	local c
	for c in "${KUBE_NODE_CMDS[@]}"; do
		version_is "$KUBE_DIR/$c" --version "Kubernetes $KUBE_VERSION" || return 1
	done
	[[ -x $AGNHOST ]] && "$AGNHOST" --help >/dev/null 2>&1
}

build_kube() {
	new_scratch
	local start=$SECONDS c
	log "building ${KUBE_NODE_CMDS[*]} and agnhost $KUBE_VERSION in $scratch"
	local pkgs=()
	for c in "${KUBE_NODE_CMDS[@]}"; do
		pkgs+=("k8s.io/kubernetes/cmd/$c")
	done
	kube_module "$KUBE_VERSION" "${pkgs[@]}" k8s.io/kubernetes/test/images/agnhost
	log "compiling ${KUBE_NODE_CMDS[*]} (minutes cold)"
	# Built the way kube-apiserver is (cgo on), so they share its build cache.
	(cd "$scratch" && mkdir out && go build -trimpath -ldflags "$KUBE_LDFLAGS" -o out/ "${pkgs[@]}")
	log "compiling agnhost (static: its image has no libc)"
	(cd "$scratch" && CGO_ENABLED=0 go build -trimpath -ldflags "$KUBE_LDFLAGS" -o out/agnhost k8s.io/kubernetes/test/images/agnhost)
	for c in "${KUBE_NODE_CMDS[@]}" agnhost; do
		install_binary "$scratch/out/$c" "$KUBE_DIR/$c"
	done
	log "kube node binaries built in $((SECONDS - start))s: $KUBE_DIR"
}

# module_copy copies module $1 out of the module cache into $scratch/src,
# writable: containerd's go.mod has exclude directives, so `go install
# ...@version` refuses it, but building inside its own module works.
module_copy() {
	local dir
	dir=$(cd "$scratch" && go mod download -json "$1" | awk -F'"' '$2 == "Dir" { print $4 }')
	if [[ -z $dir || ! -f $dir/go.mod ]]; then
		log "cannot find $1 in the module cache"
		return 1
	fi
	cp -r "$dir" "$scratch/src"
	chmod -R u+w "$scratch/src"
}

containerd_built() {
	version_is "$CONTAINERD_DIR/containerd" --version "$CONTAINERD_VERSION" &&
		version_is "$CONTAINERD_DIR/ctr" --version "$CONTAINERD_VERSION" &&
		version_is "$CONTAINERD_DIR/containerd-shim-runc-v2" -v "$CONTAINERD_VERSION"
}

build_containerd() {
	new_scratch
	local start=$SECONDS
	log "building containerd $CONTAINERD_VERSION in $scratch"
	module_copy "github.com/containerd/containerd/v2@$CONTAINERD_VERSION"
	local pkg=github.com/containerd/containerd/v2/version
	local ldflags="-s -w -X $pkg.Version=$CONTAINERD_VERSION -X $pkg.Package=github.com/containerd/containerd/v2"
	(
		cd "$scratch/src"
		mkdir ../out
		log "compiling containerd and ctr (about two minutes cold)"
		go build -trimpath -ldflags "$ldflags" -o ../out/ ./cmd/containerd ./cmd/ctr
		# The shim is static like upstream's release, so it doesn't care
		# which libc the node has.
		CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o ../out/ ./cmd/containerd-shim-runc-v2
	)
	local b
	for b in containerd ctr containerd-shim-runc-v2; do
		install_binary "$scratch/out/$b" "$CONTAINERD_DIR/$b"
	done
	log "containerd built in $((SECONDS - start))s: $CONTAINERD_DIR"
}

build_runc() {
	new_scratch
	local start=$SECONDS
	log "building runc $RUNC_VERSION in $scratch"
	if ! pkg-config --exists libseccomp 2>/dev/null; then
		log "libseccomp-dev is missing: run hack/install-deps.sh --packages-only as root"
		return 1
	fi
	module_copy "github.com/opencontainers/runc@$RUNC_VERSION"
	# Debian's runc fails on these kernels (DESIGN.md §8); seccomp is what
	# kubelet's RuntimeDefault profile needs.
	(cd "$scratch/src" && go build -trimpath -tags seccomp -ldflags "-s -w" -o ../runc .)
	install_binary "$scratch/runc" "$RUNC"
	log "runc built in $((SECONDS - start))s: $RUNC"
}

build_crictl() {
	new_scratch
	local start=$SECONDS
	log "building crictl $CRICTL_VERSION in $scratch"
	# go install takes the module path (sigs.k8s.io/cri-tools), not the repo's.
	(cd "$scratch" && GOBIN=$scratch go install -trimpath \
		-ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" \
		"sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION")
	install_binary "$scratch/crictl" "$CRICTL"
	log "crictl built in $((SECONDS - start))s: $CRICTL"
}

cni_built() {
	local p
	for p in "${CNI_PLUGINS[@]}"; do
		[[ -x $CNI_DIR/$p ]] || return 1
	done
	# A CNI plugin run without CNI_COMMAND prints its "about" line.
	{ "$CNI_DIR/loopback" 2>&1 || true; } | grep -F "$CNI_PLUGINS_VERSION" >/dev/null
}

build_cni() {
	new_scratch
	local start=$SECONDS p pkgs=()
	log "building CNI plugins ${CNI_PLUGINS[*]} $CNI_PLUGINS_VERSION in $scratch"
	for p in "${CNI_PLUGINS[@]}"; do
		case $p in
		host-local) pkgs+=("github.com/containernetworking/plugins/plugins/ipam/$p@$CNI_PLUGINS_VERSION") ;;
		portmap) pkgs+=("github.com/containernetworking/plugins/plugins/meta/$p@$CNI_PLUGINS_VERSION") ;;
		*) pkgs+=("github.com/containernetworking/plugins/plugins/main/$p@$CNI_PLUGINS_VERSION") ;;
		esac
	done
	(cd "$scratch" && CGO_ENABLED=0 GOBIN=$scratch go install -trimpath \
		-ldflags "-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$CNI_PLUGINS_VERSION" \
		"${pkgs[@]}")
	for p in "${CNI_PLUGINS[@]}"; do
		install_binary "$scratch/$p" "$CNI_DIR/$p"
	done
	log "CNI plugins built in $((SECONDS - start))s: $CNI_DIR"
}

# Debian programs the e2e images need that busybox lacks or does too
# little of: curl (session affinity, HostPort, NodePort checks), OpenBSD nc
# (`nc -u`, `nc -v -t`: busybox's nc has neither), dig/nslookup/host and
# getent (the DNS probes). They are dynamic, so each goes in with the
# libraries `ldd` names, at the same paths.
GLIBC_TOOLS=(/usr/bin/curl /usr/bin/nc.openbsd /usr/bin/dig /usr/bin/nslookup /usr/bin/host /usr/bin/getent /bin/dash)
GLIBC_PACKAGES=(busybox-static curl netcat-openbsd bind9-dnsutils libc-bin)

# The images directory is keyed by everything that goes into the images: the
# image builder's sources, the refs, agnhost's version and the Debian
# packages' versions.
images_key() {
	{
		cat "$HACK/images/imgbuild.go" "$HACK/images/pause.go"
		echo "$GGCR_VERSION ${PAUSE_REFS[*]} $AGNHOST_REF $BUSYBOX_REF ${NGINX_REFS[*]} $GLIBC_DNS_REF $KUBE_VERSION"
		echo "${GLIBC_TOOLS[*]}"
		dpkg-query -W -f='${Package} ${Version}\n' "${GLIBC_PACKAGES[@]}" 2>/dev/null || echo missing
	} | sha256sum | cut -c1-12
}
IMAGES_DIR=$ROOT/images-$(images_key)

images_built() {
	[[ -s $IMAGES_DIR/images.txt ]] || return 1
	local f ref
	while read -r f ref; do
		[[ -s $IMAGES_DIR/$f ]] || return 1
	done <"$IMAGES_DIR/images.txt"
}

# busybox_args prints imgbuild arguments that put Debian's static busybox at
# /bin/busybox with a /bin link per applet, /tmp, and the passwd/group files
# the e2e images carry (agnhost's Dockerfile adds user-defined-in-image 1000
# and group-defined-in-image 50000). Applets named in $1 (space separated)
# are left out: the image has the real program.
busybox_args() {
	local skip=" ${1:-} " bb=/bin/busybox a
	echo "-file=$bb=/bin/busybox"
	for a in $("$bb" --list); do
		[[ $a == busybox || $skip == *" $a "* ]] && continue
		echo "-link=/bin/$a=busybox"
	done
	echo "-dir=/tmp"
	echo '-text=/etc/passwd=root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\nuser-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n'
	echo '-text=/etc/group=root:x:0:\nnobody:x:65534:\nuser-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n'
	echo '-text=/etc/nsswitch.conf=passwd: files\ngroup: files\nhosts: files dns\n'
}

# glibc_args prints imgbuild arguments for $GLIBC_TOOLS and every library
# they load (the dynamic loader included), each at the path ldd reports.
glibc_args() {
	local t lib
	for t in "${GLIBC_TOOLS[@]}"; do
		echo "-file=$t=$t"
	done
	# OpenBSD nc is "nc" in the image, ahead of busybox's on PATH.
	echo "-link=/usr/bin/nc=nc.openbsd"
	# /bin/sh is dash: BusyBox's shell runs its own applets ahead of PATH,
	# so `sh -c "nc -u ..."` (the e2e probes) would get BusyBox's nc, which
	# has no -u, -t or -v.
	echo "-link=/bin/sh=dash"
	for lib in $(ldd "${GLIBC_TOOLS[@]}" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// && $2 ~ /^\(/ { print $1 }' | sort -u); do
		echo "-file=$(readlink -f "$lib")=$lib"
	done
}

build_images() {
	new_scratch
	local start=$SECONDS t
	for t in /bin/busybox "${GLIBC_TOOLS[@]}"; do
		if [[ ! -x $t ]]; then
			log "$t is missing: run hack/install-deps.sh --packages-only as root"
			return 1
		fi
	done
	log "building images in $scratch"
	(
		cd "$scratch"
		go mod init nodenet.local/build/images >/dev/null 2>&1
		mkdir imgbuild pause out
		# The sources carry `//go:build ignore` so nodenet's own module
		# (and its go.mod) never builds them; drop it here.
		sed '/^\/\/go:build ignore$/d' "$HACK/images/imgbuild.go" >imgbuild/main.go
		sed '/^\/\/go:build ignore$/d' "$HACK/images/pause.go" >pause/main.go
		go get "github.com/google/go-containerregistry@$GGCR_VERSION" >/dev/null 2>&1
		go mod tidy
		go build -trimpath -o out/imgbuild ./imgbuild
		CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o out/pause ./pause
	)
	local img=$scratch/img tags=() r imgbuild=$scratch/out/imgbuild
	mkdir -p "$img"
	for r in "${PAUSE_REFS[@]}"; do tags+=("-tag=$r"); done
	"$imgbuild" -o "$img/pause.tar" "${tags[@]}" \
		-file="$scratch/out/pause=/pause" -entrypoint=/pause -user=65535:65535
	local bb bbglibc glibc
	mapfile -t bb < <(busybox_args)
	mapfile -t bbglibc < <(busybox_args "nc nslookup sh")
	mapfile -t glibc < <(glibc_args)
	# busybox: test/images/busybox is plain busybox for Linux.
	"$imgbuild" -o "$img/busybox.tar" -tag="$BUSYBOX_REF" "${bb[@]}" -cmd=sh
	# agnhost's own image is alpine plus curl, OpenBSD nc, bind-tools and
	# agnhost at / (test/images/agnhost/Dockerfile): tests run /agnhost
	# subcommands and shell one-liners with those tools.
	local porter
	porter=$(cd "$scratch" && go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" |
		awk -F'"' '$2 == "Dir" { print $4 }')/test/images/agnhost/porter
	"$imgbuild" -o "$img/agnhost.tar" -tag="$AGNHOST_REF" "${bbglibc[@]}" "${glibc[@]}" \
		-file="$AGNHOST=/agnhost" -link=/agnhost-2=agnhost -dir=/uploads \
		-file="$porter/localhost.crt=/localhost.crt" -file="$porter/localhost.key=/localhost.key" \
		-entrypoint=/agnhost -cmd=pause
	# glibc-dns-testing is a glibc userland with dig and getent for the DNS
	# probes: the same tools, no agnhost.
	"$imgbuild" -o "$img/glibc-dns-testing.tar" -tag="$GLIBC_DNS_REF" "${bbglibc[@]}" "${glibc[@]}" -cmd=sh
	# The endpoints conformance tests only need nginx's pods to run and
	# serve: busybox httpd on port 80 stands in for it.
	tags=()
	for r in "${NGINX_REFS[@]}"; do tags+=("-tag=$r"); done
	"$imgbuild" -o "$img/nginx.tar" "${tags[@]}" "${bb[@]}" \
		-text='/usr/share/nginx/html/index.html=<html><body>nodenet nginx stand-in (busybox httpd)</body></html>\n' \
		-entrypoint=/bin/httpd -cmd=-f -cmd=-p -cmd=80 -cmd=-h -cmd=/usr/share/nginx/html
	{
		for r in "${PAUSE_REFS[@]}"; do echo "pause.tar $r"; done
		echo "agnhost.tar $AGNHOST_REF"
		echo "busybox.tar $BUSYBOX_REF"
		echo "glibc-dns-testing.tar $GLIBC_DNS_REF"
		for r in "${NGINX_REFS[@]}"; do echo "nginx.tar $r"; done
	} >"$img/images.txt"
	# Publish the directory whole, so a reader never sees half of it.
	rm -rf "$IMAGES_DIR.tmp.$$"
	mkdir -p "$ROOT"
	mv "$img" "$IMAGES_DIR.tmp.$$"
	rm -rf "$IMAGES_DIR"
	mv "$IMAGES_DIR.tmp.$$" "$IMAGES_DIR"
	log "images built in $((SECONDS - start))s: $IMAGES_DIR"
}

# Not the shared lock: nothing here overlaps what the other build scripts
# make, so this can build while kube-apiserver does.
take_build_lock build-node

if containerd_built; then
	log "containerd $CONTAINERD_VERSION cached: $CONTAINERD_DIR"
else
	build_containerd
fi
if version_is "$RUNC" --version "${RUNC_VERSION#v}"; then
	log "runc $RUNC_VERSION cached: $RUNC"
else
	build_runc
fi
if version_is "$CRICTL" --version "${CRICTL_VERSION#v}"; then
	log "crictl $CRICTL_VERSION cached: $CRICTL"
else
	build_crictl
fi
if cni_built; then
	log "CNI plugins $CNI_PLUGINS_VERSION cached: $CNI_DIR"
else
	build_cni
fi
if kube_built; then
	log "kube node binaries $KUBE_VERSION cached: $KUBE_DIR"
else
	build_kube
fi
if images_built; then
	log "images cached: $IMAGES_DIR"
else
	build_images
fi

if $print_env; then
	echo "NODENET_KUBELET=$KUBE_DIR/kubelet"
	echo "NODENET_KUBE_CONTROLLER_MANAGER=$KUBE_DIR/kube-controller-manager"
	echo "NODENET_KUBE_SCHEDULER=$KUBE_DIR/kube-scheduler"
	echo "NODENET_CONTAINERD=$CONTAINERD_DIR/containerd"
	echo "NODENET_CONTAINERD_SHIM=$CONTAINERD_DIR/containerd-shim-runc-v2"
	echo "NODENET_CTR=$CONTAINERD_DIR/ctr"
	echo "NODENET_RUNC=$RUNC"
	echo "NODENET_CRICTL=$CRICTL"
	echo "NODENET_CNI_PLUGINS_DIR=$CNI_DIR"
	echo "NODENET_IMAGES_DIR=$IMAGES_DIR"
fi
