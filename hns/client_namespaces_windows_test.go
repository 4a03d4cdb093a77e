//go:build windows

package hns

import (
	"encoding/json"
	"testing"

	"github.com/Microsoft/hnslib/hcn"
	"github.com/google/go-cmp/cmp"
)

// The host's default namespace as hcn lists it translates to one
// HostDefaultNamespace picks, with its attached endpoints.
func TestNamespaceFromHCN(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      hcn.HostComputeNamespace
		want    *Namespace
		wantErr bool
		isHost  bool
	}{
		{
			name: "the default compartment with an endpoint and a container",
			in: hcn.HostComputeNamespace{Id: "910f7d92-ba2d-4c3f-98ae-7c0ac590d2dc", NamespaceId: 1, Type: hcn.NamespaceTypeHostDefault,
				Resources: []hcn.NamespaceResource{
					{Type: hcn.NamespaceResourceTypeEndpoint, Data: json.RawMessage(`{"ID":"aa-bb"}`)},
					{Type: hcn.NamespaceResourceTypeContainer, Data: json.RawMessage(`{"ID":"c1"}`)},
				}},
			want:   &Namespace{ID: "910F7D92-BA2D-4C3F-98AE-7C0AC590D2DC", Type: NamespaceTypeHostDefault, Compartment: 1, EndpointIDs: []string{"AA-BB"}},
			isHost: true,
		},
		{
			name:   "compartment 1 without a type is still the host's",
			in:     hcn.HostComputeNamespace{Id: "x", NamespaceId: 1},
			want:   &Namespace{ID: "X", Compartment: 1},
			isHost: true,
		},
		{
			name: "a pod's namespace is not the host's",
			in:   hcn.HostComputeNamespace{Id: "p", NamespaceId: 5, Type: hcn.NamespaceTypeHost},
			want: &Namespace{ID: "P", Type: NamespaceTypeHost, Compartment: 5},
		},
		{
			name:    "an endpoint resource that is not JSON fails",
			in:      hcn.HostComputeNamespace{Id: "q", Resources: []hcn.NamespaceResource{{Type: hcn.NamespaceResourceTypeEndpoint, Data: json.RawMessage(`{`)}}},
			wantErr: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := namespaceFromHCN(OpListNamespaces, &tc.in)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("got %+v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("namespace (-want +got):\n%s", diff)
			}
			if host := HostDefaultNamespace([]Namespace{*got}) != nil; host != tc.isHost {
				t.Errorf("HostDefaultNamespace picks it = %t, want %t", host, tc.isHost)
			}
		})
	}
}
