package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodenet/nodenet/agent/status"
	"github.com/nodenet/nodenet/hns"
)

// doctorHNS runs doctor against an agent on the HNS dataplane whose status
// edit changed, and returns its JSON checks (by name) and its table.
func doctorHNS(t *testing.T, edit func(st *status.Status)) (map[string]check, string, int) {
	t.Helper()
	n := newDoctorNode(t)
	st := n.status()
	st.Dataplane, st.Proxy.Backend, st.Network.SourceVIP = "hns", "hns", "10.244.1.2"
	edit(st)
	sock := fakeAgent{status: st}.start(t)
	r := runCtl(nil, "doctor", "--socket", sock, "-o", "json")
	var d diagnosis
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		t.Fatalf("%v in:\n%s", err, r.stdout)
	}
	checks := map[string]check{}
	for _, c := range d.Checks {
		checks[c.Name] = c
	}
	table := runCtl(nil, "doctor", "--socket", sock)
	if table.code != r.code {
		t.Errorf("table exit code %d, JSON %d", table.code, r.code)
	}
	return checks, table.stdout, r.code
}

// simHNS is what the agent reports for a simulated host of release r.
func simHNS(r hns.Release, override int) *status.HNSStatus {
	sim := hns.NewSimulator(hns.SimulatorOptions{Version: r.Version, OSBuild: r.Build})
	return status.ReadHNS(context.Background(), sim, override, false)
}

func hasLine(out, part string) bool {
	return slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool { return strings.Contains(l, part) })
}

// On every modelled Windows release doctor says the HNS version and build,
// what nodenet uses (with the HNS versions that have it), what it does
// without (a warning naming the versions that would have it) and the
// backend limit; none of it fails a node.
func TestDoctorReportsWhatNodenetUsesOfEachRelease(t *testing.T) {
	for _, tc := range []struct {
		release hns.Release
		lacks   []string // features reported as warnings
		lines   []string
	}{
		{hns.Releases[0], []string{"SessionAffinity", "IPv6DualStack", "VxlanPort", "ModifyLoadbalancer"}, []string{
			"ok    hns: HNS 9.3 on Windows build 17763.1432: nodenet uses routes to other nodes' pod subnets (HNS ≥ 9.2), the node reaching its own pods on overlay (HNS ≥ 9.2), DSR (HNS 9.3–9.x or ≥ 10.2)",
			"warn: hns SessionAffinity: no session affinity ClientIP on HNS 9.3 (needs HNS ≥ 12.0): ClientIP affinity is left out",
			"warn: hns ModifyLoadbalancer: no in-place load-balancer updates on HNS 9.3 (needs HNS 15.5–15.x or ≥ 16.0): an endpoint change deletes and re-creates the load balancer",
			"ok    hns backends: up to 64 backends per load balancer, what build 17763.1432 takes",
		}},
		{hns.Releases[1], []string{"SessionAffinity", "IPv6DualStack", "VxlanPort", "ModifyLoadbalancer"}, []string{
			"ok    hns: HNS 9.5 on Windows build 17763.8146: nodenet uses",
			"ok    hns backends: up to 1024 backends per load balancer, what build 17763.8146 takes",
		}},
		{hns.Releases[2], []string{"ModifyLoadbalancer"}, []string{
			"session affinity ClientIP (HNS ≥ 12.0), IPv6 (HNS ≥ 11.10), a VXLAN port other than 4789 (HNS ≥ 10.3)",
			"ok    hns backends: up to 1024 backends per load balancer, what build 20348.0 takes",
		}},
		{hns.Releases[3], []string{"ModifyLoadbalancer"}, []string{
			"warn: hns ModifyLoadbalancer: no in-place load-balancer updates on HNS 15.4 (needs HNS 15.5–15.x or ≥ 16.0; 15.4 accepts an update and keeps the old endpoints, kubernetes issue 131466): an endpoint change deletes and re-creates the load balancer → fix: a Windows update or release with HNS 15.5–15.x or ≥ 16.0",
		}},
		{hns.Releases[4], nil, []string{
			"in-place load-balancer updates (HNS 15.5–15.x or ≥ 16.0)",
			"all 10 checks passed",
		}},
	} {
		t.Run(tc.release.Name, func(t *testing.T) {
			checks, out, code := doctorHNS(t, func(st *status.Status) { st.HNS = simHNS(tc.release, 0) })
			if code != exitOK {
				t.Errorf("exit code %d, want %d:\n%s", code, exitOK, out)
			}
			var warnedOf []string
			for name, c := range checks {
				if f, ok := strings.CutPrefix(name, "hns "); ok && c.Result == resultWarn {
					warnedOf = append(warnedOf, f)
				}
			}
			slices.Sort(warnedOf)
			want := slices.Sorted(slices.Values(tc.lacks))
			if !slices.Equal(warnedOf, want) {
				t.Errorf("warned of %v, want %v:\n%s", warnedOf, want, out)
			}
			for _, l := range tc.lines {
				if !hasLine(out, l) {
					t.Errorf("no line contains %q:\n%s", l, out)
				}
			}
		})
	}
}

func TestDoctorFailsWhatAWindowsHostCannotDo(t *testing.T) {
	t.Run("proxy.enableDSR on an HNS without DSR fails", func(t *testing.T) {
		checks, out, code := doctorHNS(t, func(st *status.Status) {
			st.Proxy.DSR = true
			st.HNS = simHNS(hns.Release{Version: hns.Version{Major: 10, Minor: 1}, Build: hns.OSBuild{Number: 18362}}, 0)
		})
		if code != exitFailed || checks["hns DSR"].Result != resultFail {
			t.Errorf("exit %d, hns DSR %+v:\n%s", code, checks["hns DSR"], out)
		}
		if !hasLine(out, "no DSR on HNS 10.1 (needs HNS 9.3–9.x or ≥ 10.2)") || !hasLine(out, "fix: unset proxy.enableDSR") {
			t.Errorf("the failure does not say which versions have DSR and what to do:\n%s", out)
		}
	})
	t.Run("a configured backend limit above the host's fails", func(t *testing.T) {
		checks, out, code := doctorHNS(t, func(st *status.Status) { st.HNS = simHNS(hns.Releases[0], 100) })
		if code != exitFailed || checks["hns backends"].Result != resultFail {
			t.Errorf("exit %d, hns backends %+v:\n%s", code, checks["hns backends"], out)
		}
		if !hasLine(out, "windows.maxBackendsPerLoadBalancer is 100, but build 17763.1432 takes 64") {
			t.Errorf("no line names both limits:\n%s", out)
		}
	})
	t.Run("a configured backend limit below the host's passes and says so", func(t *testing.T) {
		_, out, code := doctorHNS(t, func(st *status.Status) { st.HNS = simHNS(hns.Releases[4], 100) })
		if code != exitOK || !hasLine(out, "up to 100 backends per load balancer (windows.maxBackendsPerLoadBalancer; build 26100.0 takes 1024)") {
			t.Errorf("exit %d:\n%s", code, out)
		}
	})
	t.Run("an HNS restarting is a warning, not a verdict", func(t *testing.T) {
		clock := time.Unix(0, 0)
		sim := hns.NewSimulator(hns.SimulatorOptions{Now: func() time.Time { return clock }})
		sim.SimulateRestart(hns.RestartOptions{Duration: time.Minute})
		checks, out, code := doctorHNS(t, func(st *status.Status) {
			st.HNS = status.ReadHNS(context.Background(), sim, 0, true)
		})
		if code != exitOK || checks["hns"].Result != resultWarn || !hasLine(out, "cannot read the HNS version") {
			t.Errorf("exit %d, hns %+v:\n%s", code, checks["hns"], out)
		}
	})
}
