package deploy_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/nodenet/nodenet/agent"
	"github.com/nodenet/nodenet/ipam/nodecidr"
)

// podCIDRLease is the pod CIDR allocator's Lease.
const podCIDRLease = nodecidr.LeaseName

// leaseRules is what client-go's leader election does with its Lease
// (get, create, update; no list, watch, patch or delete): group/resource
// verb, and the one name where RBAC can say it.
var leaseRules = []string{
	"coordination.k8s.io/leases create",
	"coordination.k8s.io/leases get " + podCIDRLease,
	"coordination.k8s.io/leases update " + podCIDRLease,
}

func TestTheLeaderElectionRoleGrantsOnlyThePodCIDRAllocatorsLease(t *testing.T) {
	objects := mustRender(t, ".")
	role := find[*rbacv1.Role](t, objects, "nodenet-agent-leader-election")
	if role.Namespace != namespace || namespace != agent.DefaultAgentNamespace {
		t.Errorf("Role in %q, want the agents' namespace %q (the agent's default %q)", role.Namespace, namespace, agent.DefaultAgentNamespace)
	}
	var got []string
	for _, r := range role.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if len(r.ResourceNames) == 0 {
						got = append(got, g+"/"+res+" "+v)
					}
					for _, n := range r.ResourceNames {
						got = append(got, g+"/"+res+" "+v+" "+n)
					}
				}
			}
		}
	}
	slices.Sort(got)
	if diff := cmp.Diff(leaseRules, got); diff != "" {
		t.Errorf("Role grants (-what the allocator uses +granted):\n%s", diff)
	}
	b := find[*rbacv1.RoleBinding](t, objects, "nodenet-agent-leader-election")
	wantRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}
	wantSubjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: serviceAccount, Namespace: namespace}}
	if diff := cmp.Diff(wantRef, b.RoleRef); diff != "" {
		t.Errorf("binding roleRef (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantSubjects, b.Subjects); diff != "" {
		t.Errorf("binding subjects (-want +got):\n%s", diff)
	}
}
