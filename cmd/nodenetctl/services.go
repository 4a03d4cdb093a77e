package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/nodenet/nodenet/agent/status"
)

const servicesUsage = `Usage: nodenetctl services [flags]

  Print every service port the agent's proxy programmed on this node, one
  row per port and IP family: its frontends (cluster IP:port, node port,
  external and load-balancer IPs), session affinity, traffic policies and
  trafficDistribution (PreferClose:zone when this node's zone is
  preferred, :node for this node, :all after the fallback to every
  endpoint), and the backends this node sends to ("local" marks this
  node's pods).
  Traffic to a port with no endpoints is rejected ("reject"); to a port
  whose endpoints may not serve this node's traffic, dropped ("drop").

Flags:
`

func (c *ctl) services(args []string) int {
	var f agentFlags
	fs := c.flagSet("services", servicesUsage, &f)
	if code, ok := c.parse(fs, &f, args, 0); !ok {
		return code
	}
	svcs, err := f.client().Services(context.Background())
	if err != nil {
		return c.fail("services", err)
	}
	if err := printAs(c.stdout, f.output, svcs, func(w io.Writer) { printServices(w, svcs) }); err != nil {
		return c.fail("services", err)
	}
	return exitOK
}

func printServices(w io.Writer, svcs *status.Services) {
	if len(svcs.Ports) == 0 {
		fmt.Fprintln(w, "No service ports are programmed on this node.")
		return
	}
	tabulate(w, func(tw io.Writer) {
		fmt.Fprintln(tw, "NAME\tFAMILY\tTYPE\tFRONTENDS\tAFFINITY\tPOLICY\tBACKENDS")
		for _, sp := range svcs.Ports {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", sp.Name, sp.Family, sp.Type,
				frontends(sp), orDash(sp.SessionAffinity), policies(sp), backends(sp))
		}
	})
}

// hasExternalFrontends reports whether the port takes traffic besides its
// cluster IP: that traffic follows the external policy.
func hasExternalFrontends(sp status.ServicePort) bool {
	return sp.NodePort != 0 || len(sp.ExternalIPs) > 0 || len(sp.LoadBalancerIPs) > 0
}

func frontends(sp status.ServicePort) string {
	port := strconv.Itoa(sp.Port)
	var fe []string
	if sp.ClusterIP != "" {
		fe = append(fe, net.JoinHostPort(sp.ClusterIP, port))
	}
	if sp.NodePort != 0 {
		fe = append(fe, fmt.Sprintf("nodePort %d", sp.NodePort))
	}
	for _, ip := range sp.ExternalIPs {
		fe = append(fe, "external "+net.JoinHostPort(ip, port))
	}
	for _, ip := range sp.LoadBalancerIPs {
		fe = append(fe, "lb "+net.JoinHostPort(ip, port))
	}
	return strings.Join(fe, ", ")
}

func policies(sp status.ServicePort) string {
	s := "iTP=" + policyName(sp.InternalPolicyLocal)
	if hasExternalFrontends(sp) {
		s += " eTP=" + policyName(sp.ExternalPolicyLocal)
	}
	if t := topology(sp); t != "" {
		s += " " + t
	}
	return s
}

// topology is "<trafficDistribution>:<what applies here>" (zone, node, or
// all after a fallback); "hints:..." when only the slices ask for it.
func topology(sp status.ServicePort) string {
	if sp.TrafficDistribution == "" && sp.Topology == "" {
		return ""
	}
	asked := cmp.Or(sp.TrafficDistribution, "hints")
	switch sp.Topology {
	case "PreferSameZone":
		return asked + ":zone"
	case "PreferSameNode":
		return asked + ":node"
	}
	return asked + ":all"
}

func policyName(local bool) string {
	if local {
		return "Local"
	}
	return "Cluster"
}

// backends lists the endpoints traffic to the cluster IP goes to, then,
// when traffic to the other frontends goes elsewhere (eTP Local), those.
func backends(sp status.ServicePort) string {
	if !sp.HasEndpoints {
		return "reject (no endpoints)"
	}
	s := endpoints(sp.InternalEndpoints)
	if hasExternalFrontends(sp) && !slices.Equal(sp.InternalEndpoints, sp.ExternalEndpoints) {
		s += "; external: " + endpoints(sp.ExternalEndpoints)
	}
	return s
}

func endpoints(eps []status.Endpoint) string {
	if len(eps) == 0 {
		return "drop (none may serve this node's traffic)"
	}
	parts := make([]string, len(eps))
	for i, ep := range eps {
		var marks []string
		if ep.Local {
			marks = append(marks, "local")
		}
		if !ep.Ready {
			marks = append(marks, "not ready")
		}
		if ep.Terminating {
			marks = append(marks, "terminating")
		}
		parts[i] = ep.Address
		if len(marks) > 0 {
			parts[i] += " (" + strings.Join(marks, ", ") + ")"
		}
	}
	return strings.Join(parts, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
