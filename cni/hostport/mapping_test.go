package hostport

// Address plan: none; this file tests the element comment that records a
// mapping's owner.

import (
	"strings"
	"testing"

	"github.com/nodenet/nodenet/cni"
)

func TestComment(t *testing.T) {
	cid := strings.Repeat("a", 64) // containerd's and CRI-O's container IDs
	for _, tc := range []struct {
		name    string
		owner   owner
		want    string
		wantErr bool
		// back is what parseComment must return; the zero owner means owner.
		back owner
	}{
		{
			name:  "the attachment and the pod are recorded",
			owner: owner{att: cni.Attachment{ContainerID: cid, IfName: "eth0"}, pod: "default/web"},
			want:  cid + "/eth0 default/web",
		},
		{
			name:  "a pod without a name is recorded by its attachment",
			owner: owner{att: cni.Attachment{ContainerID: "c1", IfName: "net1"}},
			want:  "c1/net1",
		},
		{
			name:  "a long pod name is cut to nft's 128 bytes, the attachment never",
			owner: owner{att: cni.Attachment{ContainerID: cid, IfName: "eth0"}, pod: "kube-system/" + strings.Repeat("x", 100)},
			want:  (cid + "/eth0 kube-system/" + strings.Repeat("x", 100))[:128],
			back:  owner{att: cni.Attachment{ContainerID: cid, IfName: "eth0"}, pod: ("kube-system/" + strings.Repeat("x", 100))[:128-len(cid)-6]},
		},
		{
			name:    "an attachment longer than 128 bytes is refused",
			owner:   owner{att: cni.Attachment{ContainerID: strings.Repeat("a", 125), IfName: "eth0"}},
			wantErr: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.owner.comment()
			if (err != nil) != tc.wantErr {
				t.Fatalf("comment: %q, %v; want error %v", got, err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if got != tc.want {
				t.Errorf("comment = %q, want %q", got, tc.want)
			}
			back := tc.back
			if back == (owner{}) {
				back = tc.owner
			}
			if o, ok := parseComment(got); !ok || o != back {
				t.Errorf("parseComment(%q) = %+v, %v; want %+v", got, o, ok, back)
			}
		})
	}
	t.Run("comments that aren't ours are not parsed", func(t *testing.T) {
		for _, c := range []string{"", "manual", "/eth0", "c1/", "hand-written rule"} {
			if o, ok := parseComment(c); ok {
				t.Errorf("parseComment(%q) = %+v, want not ours", c, o)
			}
		}
	})
}
