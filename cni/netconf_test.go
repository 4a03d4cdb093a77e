package cni

// Address plan: pods in 10.244.1.0/24; hostIP 192.168.1.11 (the node).

import (
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/google/go-cmp/cmp"

	"github.com/nodenet/nodenet/cni/api"
)

func TestParseNetConf(t *testing.T) {
	tests := []struct {
		name     string
		conf     string
		wantCode uint // 0: success
		wantMsg  string
	}{
		{"a minimal 1.1.0 config parses", `{"cniVersion":"1.1.0","name":"nodenet","type":"nodenet-cni"}`, 0, ""},
		{"a 0.3.1 config parses", `{"cniVersion":"0.3.1","name":"nodenet","type":"nodenet-cni"}`, 0, ""},
		{"empty input is a decoding failure", ``, types.ErrDecodingFailure, "empty network config"},
		{"malformed JSON is a decoding failure", `{"cniVersion":`, types.ErrDecodingFailure, "not valid JSON"},
		{"a missing cniVersion is incompatible", `{"name":"nodenet"}`, types.ErrIncompatibleCNIVersion, "no cniVersion"},
		{"an unknown cniVersion is incompatible and lists the supported ones", `{"cniVersion":"9.9.9","name":"nodenet"}`, types.ErrIncompatibleCNIVersion, "0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0"},
		{"0.2.0 is refused", `{"cniVersion":"0.2.0","name":"nodenet"}`, types.ErrIncompatibleCNIVersion, `"0.2.0" is not supported`},
		{"a missing name is an invalid config", `{"cniVersion":"1.0.0"}`, types.ErrInvalidNetworkConfig, "no name"},
		{"a prevResult of the wrong shape is a decoding failure", `{"cniVersion":"1.0.0","name":"n","prevResult":{"ips":"nope"}}`, types.ErrDecodingFailure, "prevResult"},
		{"a hostPort out of range is an invalid config", `{"cniVersion":"1.0.0","name":"n","runtimeConfig":{"portMappings":[{"hostPort":70000,"containerPort":80}]}}`, types.ErrInvalidNetworkConfig, "portMappings[0]: hostPort 70000"},
		{"an unknown protocol is an invalid config", `{"cniVersion":"1.0.0","name":"n","runtimeConfig":{"portMappings":[{"hostPort":80,"containerPort":80,"protocol":"icmp"}]}}`, types.ErrInvalidNetworkConfig, `protocol "icmp"`},
		{"a bad hostIP is an invalid config", `{"cniVersion":"1.0.0","name":"n","runtimeConfig":{"portMappings":[{"hostPort":80,"containerPort":80,"hostIP":"node"}]}}`, types.ErrInvalidNetworkConfig, `hostIP "node"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conf, err := ParseNetConf([]byte(tt.conf))
			if tt.wantCode == 0 {
				if err != nil {
					t.Fatalf("ParseNetConf: %v", err)
				}
				if conf.Name == "" {
					t.Error("parsed config lost its name")
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseNetConf succeeded, want code %d", tt.wantCode)
			}
			if err.Code != tt.wantCode || !strings.Contains(err.Msg, tt.wantMsg) {
				t.Errorf("got code %d %q, want code %d containing %q", err.Code, err.Msg, tt.wantCode, tt.wantMsg)
			}
		})
	}
}

func TestCheckRequest(t *testing.T) {
	ok := api.Request{Command: api.CommandAdd, ContainerID: "c1", Netns: "/var/run/netns/p1", IfName: "eth0"}
	tests := []struct {
		name     string
		edit     func(*api.Request)
		wantCode uint
	}{
		{"a complete ADD passes", func(*api.Request) {}, 0},
		{"DEL without a netns passes", func(r *api.Request) { r.Command, r.Netns = api.CommandDel, "" }, 0},
		{"GC needs no container", func(r *api.Request) { *r = api.Request{Command: api.CommandGC} }, 0},
		{"STATUS needs no container", func(r *api.Request) { *r = api.Request{Command: api.CommandStatus} }, 0},
		{"a missing command is refused", func(r *api.Request) { r.Command = "" }, types.ErrInvalidEnvironmentVariables},
		{"an unknown command is refused", func(r *api.Request) { r.Command = "UPGRADE" }, types.ErrInvalidEnvironmentVariables},
		{"ADD without a netns is refused", func(r *api.Request) { r.Netns = "" }, types.ErrInvalidEnvironmentVariables},
		{"CHECK without a container ID is refused", func(r *api.Request) { r.Command, r.ContainerID = api.CommandCheck, "" }, types.ErrInvalidEnvironmentVariables},
		{"a container ID with a slash is refused", func(r *api.Request) { r.ContainerID = "../etc" }, types.ErrInvalidEnvironmentVariables},
		{"an ifname longer than 15 bytes is refused", func(r *api.Request) { r.IfName = "eth0123456789012" }, types.ErrInvalidEnvironmentVariables},
		{"an ifname with a slash is refused", func(r *api.Request) { r.IfName = "eth/0" }, types.ErrInvalidEnvironmentVariables},
		{"a missing ifname is refused", func(r *api.Request) { r.IfName = "" }, types.ErrInvalidEnvironmentVariables},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := ok
			tt.edit(&req)
			err := checkRequest(&req)
			var got uint
			if err != nil {
				got = err.Code
			}
			if got != tt.wantCode {
				t.Errorf("code %d (%v), want %d", got, err, tt.wantCode)
			}
		})
	}
}

func TestPodFromRequest(t *testing.T) {
	conf, cerr := ParseNetConf([]byte(`{"cniVersion":"1.1.0","name":"nodenet","runtimeConfig":{
		"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"TCP","hostIP":"192.168.1.11"},{"hostPort":53,"containerPort":53,"protocol":"udp"},{"hostPort":9090,"containerPort":90}],
		"dns":{"servers":["10.96.0.10"],"searches":["default.svc.cluster.local"],"options":["ndots:5"]}}}`))
	if cerr != nil {
		t.Fatal(cerr)
	}
	req := &api.Request{Command: api.CommandAdd, ContainerID: "c1", Netns: "/var/run/netns/p1", IfName: "eth0",
		Args: "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=c1;K8S_POD_UID=u-1;OTHER=x"}
	pod, cerr := podFromRequest(req, conf)
	if cerr != nil {
		t.Fatal(cerr)
	}
	want := &Pod{
		Attachment: Attachment{ContainerID: "c1", IfName: "eth0"},
		Netns:      "/var/run/netns/p1",
		Namespace:  "default", Name: "web-0", UID: "u-1",
		PortMappings: []PortMapping{
			{HostPort: 8080, ContainerPort: 80, Protocol: "tcp", HostIP: "192.168.1.11"},
			{HostPort: 53, ContainerPort: 53, Protocol: "udp"},
			{HostPort: 9090, ContainerPort: 90, Protocol: "tcp"},
		},
		DNS: DNS{Nameservers: []string{"10.96.0.10"}, Search: []string{"default.svc.cluster.local"}, Options: []string{"ndots:5"}},
	}
	if diff := cmp.Diff(want, pod); diff != "" {
		t.Errorf("pod (-want +got):\n%s", diff)
	}
	t.Run("malformed CNI_ARGS are refused", func(t *testing.T) {
		req := *req
		req.Args = "K8S_POD_NAME"
		if _, err := podFromRequest(&req, conf); err == nil || err.Code != types.ErrInvalidEnvironmentVariables {
			t.Errorf("got %v, want code %d", err, types.ErrInvalidEnvironmentVariables)
		}
	})
}
