package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nodenet/nodenet/agent/status"
)

const statusUsage = `Usage: nodenetctl status [flags]

  Print what the agent on this node runs: the network (type, name, pod
  CIDRs, node IP, source VIP, VXLAN VNI and port), DSR, how many pod
  attachments the agent released for belonging to no pod sandbox of the
  container runtime, whether each part (network, CNI server, service
  proxy) is ready and why not, and how long ago the proxy last synced.

Flags:
`

func (c *ctl) status(args []string) int {
	var f agentFlags
	fs := c.flagSet("status", statusUsage, &f)
	if code, ok := c.parse(fs, &f, args, 0); !ok {
		return code
	}
	st, err := f.client().Status(context.Background())
	if err != nil {
		return c.fail("status", err)
	}
	now := c.now()
	if err := printAs(c.stdout, f.output, st, func(w io.Writer) { printStatus(w, st, now) }); err != nil {
		return c.fail("status", err)
	}
	return exitOK
}

func printStatus(w io.Writer, st *status.Status, now time.Time) {
	n := st.Network
	tabulate(w, func(tw io.Writer) {
		row := func(label, value string) { fmt.Fprintf(tw, "%s:\t%s\n", label, value) }
		row("Node", st.NodeName)
		row("Dataplane", fmt.Sprintf("%s (agent %s, started %s)", st.Dataplane, orNone(st.Version), ago(now, st.StartedAt)))
		network := fmt.Sprintf("%s %q", n.Mode, n.Name)
		if n.ID != "" {
			network += " (" + n.ID + ")"
		}
		row("Network", network)
		if n.VNI != 0 || n.Port != 0 {
			row("VXLAN", fmt.Sprintf("VNI %d, port %d", n.VNI, n.Port))
		}
		row("Pod CIDRs", orNone(strings.Join(n.PodCIDRs, ", ")))
		row("Node IP", orNone(n.NodeIP))
		row("Source VIP", orNone(n.SourceVIP))
		row("DSR", onOff(st.Proxy.DSR))
		row("Remote nodes", fmt.Sprint(n.RemoteNodes))
		if o := st.CNI.OrphanRelease; o != nil {
			row("Orphan release", orphanReleaseDetail(o, now))
		}
	})
	fmt.Fprintln(w)
	tabulate(w, func(tw io.Writer) {
		fmt.Fprintln(tw, "PART\tREADY\tDETAIL")
		fmt.Fprintf(tw, "network\t%s\t%s\n", yesNo(n.Ready), networkDetail(n))
		fmt.Fprintf(tw, "cni\t%s\t%s\n", yesNo(st.CNI.Ready), cniDetail(st.CNI))
		fmt.Fprintf(tw, "proxy\t%s\t%s\n", yesNo(proxyReady(st.Proxy)), proxyDetail(st.Proxy, now))
	})
}

func networkDetail(n status.NetworkStatus) string {
	if n.Ready {
		return fmt.Sprintf("%s network %q exists", n.Mode, n.Name)
	}
	parts := make([]string, 0, 2)
	for _, s := range []string{n.Reason, n.Message} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return "the agent gave no reason"
	}
	return strings.Join(parts, ": ")
}

func cniDetail(c status.CNIStatus) string {
	s := "socket " + c.SocketPath + ", conflist " + c.ConflistPath
	if !c.Ready {
		s = "pods get \"try again later\" until the network is ready; " + s
	}
	return s
}

// orphanReleaseDetail says what the agent released for belonging to no
// pod sandbox, and whether it can read the runtime's sandboxes.
func orphanReleaseDetail(o *status.OrphanReleaseStatus, now time.Time) string {
	s := fmt.Sprintf("%s released (grace %s), sandboxes from %s", plural(o.Released, "attachment"), o.GracePeriod, o.RuntimeEndpoint)
	switch {
	case o.LastError != "":
		s += fmt.Sprintf("; last check %s failed, nothing released: %s", ago(now, o.LastRun), o.LastError)
	default:
		sandboxes := fmt.Sprintf("%d sandboxes", o.Sandboxes)
		if o.Sandboxes == 1 {
			sandboxes = "1 sandbox"
		}
		s += fmt.Sprintf("; last check %s (%s)", ago(now, o.LastRun), sandboxes)
	}
	return s
}

func proxyReady(p status.ProxyStatus) bool { return p.Running && p.Healthy }

func proxyDetail(p status.ProxyStatus, now time.Time) string {
	if !p.Running {
		return fmt.Sprintf("%s, source %s: not started (it starts once the network is ready)", p.Backend, p.Source)
	}
	s := fmt.Sprintf("%s, source %s, %s, last sync %s, %s", p.Backend, p.Source,
		plural(int(p.Syncs), "sync"), ago(now, p.LastSync), plural(p.ServicePorts, "service port"))
	if !p.Healthy {
		s = "unhealthy (its /healthz fails); " + s
	}
	return s
}
