// Package overlay builds and keeps this node's network: the local network
// pods attach to (an HNS Overlay or L2Bridge network on Windows, a bridge
// plus, in overlay mode, a vxlan device on Linux), the source-VIP endpoint
// that Windows overlay service proxying needs, and the routes to every other
// node's pod subnet.
//
// The dataplane is behind Interface, with one implementation per platform:
// overlay/hnsnet (HNS; compiled everywhere and tested on the hns simulator)
// and overlay/linuxnet (netlink). Controller is the platform-neutral part:
// it reads this node's pod CIDR and every other Node from the API server,
// publishes flannel's node annotations so flannel nodes learn this one (and
// this one learns them), reports readiness as a Node condition, and hands
// the ready network to the CNI server and the proxy.
//
// Everything is idempotent by contract: reconciling a node that is already
// right reads state and writes nothing, so an agent restart or a periodic
// resync never disturbs running pods.
package overlay
