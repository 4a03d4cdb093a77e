package hns

import "context"

// simDefaultNamespaceID is the ID of the simulated host's default
// namespace. It is outside the per-simulator sequence (which numbers from
// 1), so adding it shifts no other ID, and sorts first.
const simDefaultNamespaceID = "0000005E-0000-4000-8000-000000000000"

// newDefaultNamespace is the namespace every simulated host starts with:
// a Windows host has one for its default compartment before any
// container runtime or CNI runs (Get-HnsNamespace lists it with
// CompartmentId 1, IsDefault: projectcalico/calico issue 8465).
func newDefaultNamespace() *Namespace {
	return &Namespace{ID: simDefaultNamespaceID, Type: NamespaceTypeHostDefault, Compartment: DefaultCompartment}
}

// ListNamespaces implements Interface.
func (s *Simulator) ListNamespaces(ctx context.Context) ([]Namespace, error) {
	var out []Namespace
	err := s.call(ctx, OpListNamespaces, "", func() error {
		for _, id := range sortedIDs(s.namespaces) {
			out = append(out, *cloneNamespace(s.namespaces[id]))
		}
		return nil
	})
	return out, err
}
