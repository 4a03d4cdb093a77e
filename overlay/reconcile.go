package overlay

import (
	"context"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/internal/netaddr"
)

// NetworkUnavailable condition reasons this controller sets.
const (
	ReasonReady                = "NodenetReady"
	ReasonNoPodCIDR            = "NoPodCIDR"
	ReasonInvalidPodCIDR       = "InvalidPodCIDR"
	ReasonNoNodeIP             = "NoNodeIP"
	ReasonNetworkMismatch      = "NetworkMismatch"
	ReasonInvalidNetworkConfig = "InvalidNetworkConfig"
	ReasonNetworkError         = "NetworkError"
	// ReasonFamiliesDropped is a warning Event: the node has pod CIDRs of
	// an IP family it does not run (IPv6 on an overlay node).
	ReasonFamiliesDropped = "IPFamiliesDropped"
)

// reconcile brings the local network, this Node's annotations and
// condition, and the remote routes in line. It returns an error only for
// failures worth retrying with backoff; a state that needs a Node or config
// change (no pod CIDR, a mismatching network) is reported on the Node and
// rechecked on the next event or resync.
func (c *Controller) reconcile(ctx context.Context) error {
	self, err := c.nodes.Get(c.opts.NodeName)
	if apierrors.IsNotFound(err) {
		where := "does not exist"
		if c.opts.Nodes != nil {
			where = "is in no manifest"
		}
		c.setNotReady(ctx, nil, ReasonNetworkError, fmt.Errorf("Node %q %s (is network.nodeName / NODE_NAME right?)", c.opts.NodeName, where))
		return nil
	}
	if err != nil {
		return err
	}
	spec, reason, err := c.localSpec(self)
	if err != nil {
		c.setNotReady(ctx, self, reason, err)
		return nil
	}
	local, err := c.opts.Dataplane.EnsureLocal(ctx, spec)
	switch {
	case IsMismatch(err):
		c.setNotReady(ctx, self, ReasonNetworkMismatch, err)
		return nil
	case IsSpecError(err):
		c.setNotReady(ctx, self, ReasonInvalidNetworkConfig, err)
		return nil
	case err != nil:
		c.setNotReady(ctx, self, ReasonNetworkError, err)
		return err
	}
	// The config reserves the source-VIP offset on every node, whether or
	// not the dataplane puts an endpoint there (Linux doesn't), so a node
	// can change platform or mode without a pod holding that address.
	if spec.SourceVIP.IsValid() && !slices.Contains(local.Reserved, spec.SourceVIP) {
		local.Reserved = append(local.Reserved, spec.SourceVIP)
	}
	if local.Writes > 0 {
		c.log.Info("Node network programmed", "network", local.Name, "writes", local.Writes)
	}
	c.setReady(local)
	if err := c.publish(ctx, self, local); err != nil {
		return err
	}
	return c.syncRemotes(ctx)
}

// localSpec derives the dataplane spec from the config and this Node, or
// says (reason, error) why the network cannot be built yet.
func (c *Controller) localSpec(self *v1.Node) (LocalSpec, string, error) {
	cfg := c.opts.Config
	raw := rawPodCIDRs(self)
	if len(raw) == 0 {
		if c.opts.Nodes != nil {
			return LocalSpec{}, ReasonNoPodCIDR, fmt.Errorf("Node %s has no spec.podCIDRs: give its manifest one; pods can't start until then", self.Name)
		}
		return LocalSpec{}, ReasonNoPodCIDR, fmt.Errorf("Node %s has no spec.podCIDRs yet: waiting for kube-controller-manager (--allocate-node-cidrs) to assign one; pods can't start until then", self.Name)
	}
	if errs := config.ValidateForNode(cfg, raw); len(errs) > 0 {
		return LocalSpec{}, ReasonInvalidPodCIDR, fmt.Errorf("Node %s pod CIDRs %v: %w", self.Name, raw, errs.ToAggregate())
	}
	podCIDRs, err := PodCIDRsOf(self, c.rules.Families)
	if err != nil {
		return LocalSpec{}, ReasonInvalidPodCIDR, err
	}
	if dropped := len(raw) - len(podCIDRs); dropped > 0 && c.status.once("families:"+strings.Join(raw, ",")) {
		msg := fmt.Sprintf("running pod CIDRs %v of %v: this node runs IP families %v", podCIDRs, raw, c.rules.Families)
		if cfg.Network.Mode == config.NetworkModeOverlay {
			msg += " (overlay networks are IPv4 only, KEP-5100)"
		}
		c.status.warn(ReasonFamiliesDropped, msg)
	}
	spec := LocalSpec{
		Mode:              cfg.Network.Mode,
		Name:              cfg.Network.Name,
		PodCIDRs:          podCIDRs,
		ExternalInterface: cfg.Network.ExternalInterface,
		MTU:               int(cfg.Network.MTU),
		AllowRecreate:     cfg.Network.AllowRecreate,
	}
	for _, p := range podCIDRs {
		gw, _ := netaddr.AtOffset(p, config.GatewayOffset)
		spec.Gateways = append(spec.Gateways, gw)
	}
	spec.NodeIP = c.nodeIP(self, false)
	if spec.Mode == config.NetworkModeL2Bridge && slices.Contains(c.rules.Families, config.IPv6) {
		spec.NodeIPv6 = c.nodeIP(self, true)
	}
	if !spec.NodeIP.IsValid() {
		return LocalSpec{}, ReasonNoNodeIP, fmt.Errorf("Node %s has no IPv4 InternalIP and nodeIPOverride sets none: the network needs this node's underlay address", self.Name)
	}
	if spec.Mode == config.NetworkModeOverlay {
		spec.VNI, spec.Port = uint32(cfg.Network.VXLAN.VNI), uint16(cfg.Network.VXLAN.Port)
		vip, err := cfg.ResolveSourceVIP(raw)
		if err != nil {
			return LocalSpec{}, ReasonInvalidPodCIDR, fmt.Errorf("network.sourceVIP: %w", err)
		}
		spec.SourceVIP = vip
	}
	return spec, "", nil
}

// nodeIP is the nodeIPOverride of the family, else the Node's InternalIP.
func (c *Controller) nodeIP(self *v1.Node, ipv6 bool) netip.Addr {
	for _, s := range c.opts.Config.NodeIPOverride {
		if ip, err := netip.ParseAddr(s); err == nil && ip.Is6() == ipv6 {
			return ip
		}
	}
	return NodeInternalIP(self, ipv6)
}

// setReady records local and hands it over when it is new or changed.
func (c *Controller) setReady(local *LocalNetwork) {
	c.mu.Lock()
	changed := c.ready != nil || !sameNetwork(c.local, local)
	c.local, c.ready = local, nil
	c.mu.Unlock()
	if changed {
		c.log.Info("Node network ready", "network", local.Name, "podCIDRs", local.PodCIDRs, "sourceVIP", netaddr.OrNone(local.SourceVIP), "vtepMAC", local.VtepMAC.String())
		c.opts.OnReady(local)
	}
}

// setNotReady reports why the network is not ready: log, Node condition
// and Event (both only when the reason changes), and OnNotReady when it
// was ready.
func (c *Controller) setNotReady(ctx context.Context, self *v1.Node, reason string, err error) {
	if ctx.Err() != nil {
		// Shutting down is not a network failure: a dying agent must not
		// mark a working network unavailable on its way out.
		return
	}
	c.mu.Lock()
	wasReady := c.ready == nil
	c.ready = err
	c.mu.Unlock()
	c.log.Error(err, "Node network not ready", "reason", reason)
	if wasReady {
		c.opts.OnNotReady(err)
	}
	if self != nil {
		c.status.setCondition(ctx, self, v1.ConditionTrue, reason, err.Error())
	}
}

// publish writes flannel's annotations and the NetworkUnavailable=False
// condition on this Node when they differ.
func (c *Controller) publish(ctx context.Context, self *v1.Node, local *LocalNetwork) error {
	want, err := OwnAnnotations(local, c.rules.VNI)
	if err != nil {
		return err
	}
	if err := c.status.ensureAnnotations(ctx, self, want); err != nil {
		return err
	}
	c.status.setCondition(ctx, self, v1.ConditionFalse, ReasonReady, "nodenet configured the node network "+local.Name)
	return nil
}

// syncRemotes programs every other routable Node.
func (c *Controller) syncRemotes(ctx context.Context) error {
	all, err := c.nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	var remotes []RemoteNode
	for _, n := range all {
		if n.Name == c.opts.NodeName {
			continue
		}
		seen[n.Name] = true
		r, problem := RemoteFromNode(n, c.rules)
		if problem == nil {
			c.status.peerOK(n.Name)
			c.lastGood[n.Name] = r
			remotes = append(remotes, r)
			continue
		}
		c.status.peerProblem(problem)
		if prev, ok := c.lastGood[n.Name]; ok && problem.Reason == PeerMalformedAnnotation {
			remotes = append(remotes, prev) // keep what worked; don't cut a node over a typo
		}
	}
	for name := range c.lastGood {
		if !seen[name] {
			delete(c.lastGood, name)
		}
	}
	slices.SortFunc(remotes, func(a, b RemoteNode) int { return strings.Compare(a.Name, b.Name) })
	res, err := c.opts.Dataplane.SyncRemotes(ctx, remotes)
	if err != nil {
		return fmt.Errorf("programming routes to %d remote nodes: %w", len(remotes), err)
	}
	if res.Writes > 0 {
		c.log.Info("Remote node routes synced", "nodes", len(remotes), "added", res.Added, "updated", res.Updated, "removed", res.Removed, "writes", res.Writes)
	}
	c.mu.Lock()
	changed := !reflect.DeepEqual(c.remote, remotes)
	c.remote = remotes
	c.mu.Unlock()
	if changed && c.opts.OnRemotes != nil {
		c.opts.OnRemotes(slices.Clone(remotes))
	}
	return nil
}

// sameNetwork compares two LocalNetworks ignoring the write count.
func sameNetwork(a, b *LocalNetwork) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, y := *a, *b
	x.Writes, y.Writes = 0, 0
	return reflect.DeepEqual(x, y)
}

// meshRelevantChange reports whether a peer Node changed in something
// RemoteFromNode reads.
func meshRelevantChange(o, n *v1.Node) bool {
	if !slices.Equal(o.Spec.PodCIDRs, n.Spec.PodCIDRs) || o.Spec.PodCIDR != n.Spec.PodCIDR ||
		!reflect.DeepEqual(o.Status.Addresses, n.Status.Addresses) {
		return true
	}
	for _, k := range []string{AnnotationBackendType, AnnotationBackendData, AnnotationPublicIP, AnnotationPublicIPOverwrite, AnnotationPublicIPv6, AnnotationPublicIPv6Overwrite} {
		if o.Annotations[k] != n.Annotations[k] {
			return true
		}
	}
	return false
}
