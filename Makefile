# nodenet — see README.md. Every target works on a fresh Debian machine as
# root: `make test` installs what the tests need (hack/install-deps.sh).

GO       ?= go
BIN      := bin
PKGS     := ./...
# Windows builds of the tests run under Wine (hack/setup-wine.sh); HNS
# itself is absent there (hack/wine/computenetwork.c stands in and fails
# every call). Only hns, the host route table (its List and row
# conversion run on Wine's iphlpapi) and hnsnet (its forwarding row) for
# now: Wine 8 lacks the delete
# call Go 1.26's os.RemoveAll uses, so packages whose tests use t.TempDir
# fail cleanup. Of nodenetctl, the HNS render's tests (golden files and
# all, from a Windows build) run.
WINE_PKGS := ./hns/ ./overlay/hostroute/ ./overlay/hnsnet/

.PHONY: all build cross test test-unit test-windows deps lint fmt clean image image-check

all: build

# The version every binary reports (nodenetctl status, the image label).
VERSION ?= $(shell git describe --always --dirty --tags 2>/dev/null || echo devel)
LDFLAGS := -X github.com/nodenet/nodenet/internal/version.linked=$(VERSION)

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/...

# The Linux image, without Docker or a registry (hack/mkimage): an OCI
# archive holding an index for linux/amd64 and linux/arm64 of static
# binaries. The same commit gives the same digest, written beside it.
# IMAGE names it; deploy/README.md says how to push it to a registry.
IMAGE ?= ghcr.io/nodenet/nodenet:$(VERSION)
IMAGE_ARCHIVE ?= $(BIN)/nodenet-image.tar
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
image:
	@mkdir -p $(BIN)
	$(GO) run ./hack/mkimage -o $(IMAGE_ARCHIVE) -image $(IMAGE) -version $(VERSION) -platforms $(IMAGE_PLATFORMS)

# Builds the image twice, the second time with an empty Go build cache,
# and fails unless both digests are equal.
image-check:
	@mkdir -p $(BIN)
	$(GO) run ./hack/mkimage -o $(BIN)/image-check-1.tar -image $(IMAGE) -version $(VERSION) -platforms $(IMAGE_PLATFORMS)
	GOCACHE=$$(mktemp -d) && trap 'rm -rf $$GOCACHE' EXIT && GOCACHE=$$GOCACHE \
		$(GO) run ./hack/mkimage -o $(BIN)/image-check-2.tar -image $(IMAGE) -version $(VERSION) -platforms $(IMAGE_PLATFORMS)
	@a=$$(cat $(BIN)/image-check-1.tar.digest); b=$$(cat $(BIN)/image-check-2.tar.digest); \
		echo "first $$a"; echo "second $$b"; test "$$a" = "$$b"

cross:
	GOOS=windows GOARCH=amd64 $(GO) build -o $(BIN)/windows/ ./cmd/...

deps:
	bash hack/install-deps.sh

# Unit, privileged (root) and integration (real kube-apiserver + etcd)
# tests, then the Windows builds of the tests under Wine.
test: deps test-unit test-windows

# The real-node tests (test/kubenode: kubelet, containerd, runc, images)
# find their binaries in the environment; the build script caches them
# (minutes once, then a second) and prints their paths.
NODE_ENV = set -a && eval "$$(bash hack/build-node-binaries.sh --print-env)" && \
	eval "$$(bash hack/build-kubectl.sh --print-env)" && set +a &&

test-unit:
	$(NODE_ENV) $(GO) test -race -count=1 $(PKGS)

test-windows:
	GOOS=windows GOARCH=amd64 $(GO) test -count=1 -exec "$(CURDIR)/hack/wine-exec.sh" $(WINE_PKGS)
	GOOS=windows GOARCH=amd64 $(GO) test -count=1 -exec "$(CURDIR)/hack/wine-exec.sh" -run 'TestRenderHNS' ./cmd/nodenetctl/

# lint also checks that imports only point down a floor
# (hack/import-graph.sh: config below the parts, the parts below agent/).
lint:
	$(GO) vet $(PKGS)
	@bash hack/import-graph.sh >/dev/null || { bash hack/import-graph.sh | grep '^UP'; exit 1; }

	GOOS=windows GOARCH=amd64 $(GO) vet $(PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN)

# nodenet's nftables service proxy against kube-proxy's on a real apiserver
# (bench/proxy): at 1k, 5k, 10k, 25k and 50k Services × 10 endpoints, each
# proxy's first sync, one endpoint added, one more Service, restart onto its
# table and peak RSS; kube-proxy only up to the size whose first sync ends
# within 10 minutes. Needs root; about 45 minutes on 2 cores; not part of
# test. One scale: make bench-proxy BENCH_PROXY_SCALES=10000. Writes
# bench/proxy/results/{results.json,results.svg,scaling.svg}.
BENCH_PROXY_SCALES ?= 1000,5000,10000,25000,50000
.PHONY: bench-proxy
bench-proxy:
	bash hack/build-kube-binaries.sh
	bash hack/build-kube-proxy.sh
	$(GO) run ./bench/proxy -scales $(BENCH_PROXY_SCALES) -services 10000 -endpoints 10 -out bench/proxy/results

# The README's first command: a nodenet cluster on this machine (three
# Linux nodes and a simulated Windows one as network namespaces, a real
# kube-apiserver, one nodenet-agent process per node), walked through step
# by step and removed on exit. Needs root; on a fresh machine it installs
# the packages it needs (iproute2, nftables, ...) and builds the
# kube-apiserver/etcd cache first (minutes, once).
.PHONY: demo demo-clean
demo: build
	bash hack/install-deps.sh --packages-only
	bash hack/build-kube-binaries.sh
	$(GO) build -o $(BIN)/nodenet-demo ./demo
	$(BIN)/nodenet-demo -bin $(BIN)

# Removes what an interrupted demo left behind: its processes, files,
# namespaces and links. Running demos and tests are left alone.
demo-clean:
	$(GO) build -o $(BIN)/nodenet-demo ./demo
	$(BIN)/nodenet-demo -clean

# docs/config-reference.md from config/types.go's doc comments and the
# defaults config.SetDefaults sets (hack/configref); its test fails when
# the committed file is stale.
.PHONY: config-reference
config-reference:
	$(GO) run ./hack/configref -o docs/config-reference.md

# Kubernetes' own e2e suite judges a real node: etcd, kube-apiserver,
# kube-controller-manager and kube-scheduler on this machine, and
# CONFORMANCE_NODES nodes (network namespaces) each running containerd +
# runc, kubelet and nodenet-agent as the only CNI and service proxy
# (test/kubenode). Runs the [sig-network] conformance specs with ginkgo and
# writes docs/conformance.md. Needs root; builds everything it runs first
# (long once, then cached).
CONFORMANCE_NODES ?= 2
# install: nodenet through its DaemonSet (make image + kubectl apply -k);
# process: agent processes the harness starts, for debugging.
CONFORMANCE_MODE ?= install
.PHONY: conformance
conformance: build
	bash hack/install-deps.sh --packages-only
	bash hack/build-kube-binaries.sh
	bash hack/build-node-binaries.sh
	bash hack/build-e2e.sh
	bash hack/build-kubectl.sh
	set -a && eval "$$(bash hack/build-kube-binaries.sh --print-env)" && \
		eval "$$(bash hack/build-node-binaries.sh --print-env)" && \
		eval "$$(bash hack/build-e2e.sh --print-env)" && \
		eval "$$(bash hack/build-kubectl.sh --print-env)" && set +a && \
		$(GO) run ./test/kubenode/conformance -bin $(BIN) -nodes $(CONFORMANCE_NODES) -mode $(CONFORMANCE_MODE) -out docs/conformance.md

# The wider judge: kube-proxy's own periodic sig-network job's specs
# (ci-kubernetes-kind-network: every [sig-network] spec but its cloud,
# IPv6, dual-stack and NetworkPolicy skips; 155 in e2e.test v1.37.1) on
# the same two installed nodes, ginkgo in parallel. Writes
# docs/conformance-network.md; about an hour on 2 cores.
CONFORMANCE_PROCS ?= 4
.PHONY: conformance-network
conformance-network: build
	bash hack/install-deps.sh --packages-only
	bash hack/build-kube-binaries.sh
	bash hack/build-node-binaries.sh
	bash hack/build-e2e.sh
	bash hack/build-kubectl.sh
	set -a && eval "$$(bash hack/build-kube-binaries.sh --print-env)" && \
		eval "$$(bash hack/build-node-binaries.sh --print-env)" && \
		eval "$$(bash hack/build-e2e.sh --print-env)" && \
		eval "$$(bash hack/build-kubectl.sh --print-env)" && set +a && \
		$(GO) run ./test/kubenode/conformance -bin $(BIN) -nodes $(CONFORMANCE_NODES) -mode $(CONFORMANCE_MODE) \
			-profile network -procs $(CONFORMANCE_PROCS) -timeout 150m -out docs/conformance-network.md

# The agent's lifecycle under traffic through the DaemonSet on two real
# nodes (test/kubenode TestInstall): rollout restart, upgrade to a second
# image, the agent pod deleted during a burst of pod creations; writes
# docs/lifecycle.md. make test runs the same test without the report.
.PHONY: lifecycle
lifecycle:
	bash hack/install-deps.sh --packages-only
	bash hack/build-kube-binaries.sh
	bash hack/build-node-binaries.sh
	bash hack/build-kubectl.sh
	set -a && eval "$$(bash hack/build-kube-binaries.sh --print-env)" && \
		eval "$$(bash hack/build-node-binaries.sh --print-env)" && \
		eval "$$(bash hack/build-kubectl.sh --print-env)" && set +a && \
		NODENET_LIFECYCLE_REPORT=$(CURDIR)/docs/lifecycle.md $(GO) test -count=1 -timeout 30m -run '^TestInstall$$' -v ./test/kubenode/
