package hnsendpoint

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/nodenet/nodenet/cni"
)

// NamePrefix starts the name of every endpoint this package creates.
const NamePrefix = "nodenet-pod:"

// maxIfNameLength is CNI's interface name limit (libcni's
// ValidateInterfaceName).
const maxIfNameLength = 15

// EndpointName returns the HNS endpoint name of attachment a:
//
//	nodenet-pod:<containerID>:<ifname>
//
// e.g. "nodenet-pod:3f1c…e9:eth0". The scheme is deterministic, so an ADD
// retried for the same attachment finds its endpoint, a DEL finds it
// without the namespace, and List recovers the attachment from the name
// alone. It cannot be confused with an endpoint someone else made: CNI
// container IDs ([a-zA-Z0-9][a-zA-Z0-9_.-]*) and interface names (no '/',
// ':' or white space) never contain ':', so the prefix is unambiguous and
// the last ':' separates the two parts. The reference plugins name theirs
// "<containerID>_<network>", the overlay's source-VIP host endpoint and
// kube-proxy's have names of their own; none starts with NamePrefix.
//
// It fails when a's parts could not be parsed back.
func EndpointName(a cni.Attachment) (string, error) {
	if err := validContainerID(a.ContainerID); err != nil {
		return "", err
	}
	if err := validIfName(a.IfName); err != nil {
		return "", err
	}
	return NamePrefix + a.ContainerID + ":" + a.IfName, nil
}

// ParseEndpointName returns the attachment an endpoint name stands for;
// ok is false for every name EndpointName cannot produce.
func ParseEndpointName(name string) (a cni.Attachment, ok bool) {
	rest, found := strings.CutPrefix(name, NamePrefix)
	if !found {
		return cni.Attachment{}, false
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		return cni.Attachment{}, false
	}
	a = cni.Attachment{ContainerID: rest[:i], IfName: rest[i+1:]}
	if validContainerID(a.ContainerID) != nil || validIfName(a.IfName) != nil {
		return cni.Attachment{}, false
	}
	return a, true
}

// validContainerID applies libcni's rule: [a-zA-Z0-9][a-zA-Z0-9_.-]*.
func validContainerID(id string) error {
	if id == "" {
		return fmt.Errorf("container id is empty")
	}
	for i, r := range id {
		alnum := r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r))
		if alnum || (i > 0 && (r == '_' || r == '.' || r == '-')) {
			continue
		}
		return fmt.Errorf("container id %q: invalid character %q (want [a-zA-Z0-9][a-zA-Z0-9_.-]*)", id, r)
	}
	return nil
}

// validIfName applies libcni's interface name rules.
func validIfName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("interface name is empty")
	case len(name) > maxIfNameLength:
		return fmt.Errorf("interface name %q is longer than %d characters", name, maxIfNameLength)
	case name == "." || name == "..":
		return fmt.Errorf("interface name %q is not a name", name)
	case strings.ContainsFunc(name, func(r rune) bool { return r == '/' || r == ':' || unicode.IsSpace(r) }):
		return fmt.Errorf("interface name %q contains '/', ':' or white space", name)
	}
	return nil
}

// parseNamespaceID checks that netns (CNI_NETNS on Windows) is an HCN
// namespace GUID, as containerd passes it, and returns it without braces.
// It wraps cni.ErrNetnsNotFound so the server answers "invalid netns".
func parseNamespaceID(netns string) (string, error) {
	if netns == "" {
		return "", fmt.Errorf("pod has no network namespace (CNI_NETNS is empty; want the HCN namespace GUID): %w", cni.ErrNetnsNotFound)
	}
	id := netns
	if len(id) == 38 && id[0] == '{' && id[37] == '}' {
		id = id[1:37]
	}
	if !isGUID(id) {
		return "", fmt.Errorf("pod network namespace %q is not an HCN namespace GUID (e.g. 5a3c1e26-0b7f-4c2d-9e1a-2f6b8d4c7e10, as containerd passes it): %w", netns, cni.ErrNetnsNotFound)
	}
	return id, nil
}

// isGUID reports whether s has the 8-4-4-4-12 hex digit form.
func isGUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
