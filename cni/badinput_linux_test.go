package cni_test

// Address plan: see node_linux_test.go; the small-pool node is
// 10.244.9.0/29 (.1 gateway, .2 source VIP, .3-.6 for 4 pods).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/nodenet/nodenet/cni/api"
	"github.com/nodenet/nodenet/test/netnode"
)

// runPlugin execs nodenet-cni exactly as a runtime does: CNI_* in the
// environment, the config on stdin, a CNI error as JSON on stdout.
func runPlugin(t *testing.T, env []string, stdin string) (string, *types.Error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binaries(t), "nodenet-cni"))
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Run(); err == nil {
		return stdout.String(), nil
	}
	var cniErr types.Error
	if err := json.Unmarshal(stdout.Bytes(), &cniErr); err != nil {
		t.Fatalf("plugin failed without a CNI error on stdout: %q", stdout.String())
	}
	return stdout.String(), &cniErr
}

func TestBadInput(t *testing.T) {
	node := newTestNode(t, podCIDR)
	node.startCNI(t, netnode.NodenetCNIOptions{Network: node.nw})
	pod := node.NewPod(t, "bad")
	conf := func(version, socket string) string {
		return fmt.Sprintf(`{"cniVersion":%q,"name":"nodenet","type":"nodenet-cni","socketPath":%q}`, version, socket)
	}
	addEnv := func(edit func(map[string]string)) []string {
		env := map[string]string{
			"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "ctr-bad", "CNI_NETNS": pod.Path,
			"CNI_IFNAME": "eth0", "CNI_PATH": binaries(t),
		}
		edit(env)
		var out []string
		for k, v := range env {
			if v != "" {
				out = append(out, k+"="+v)
			}
		}
		return out
	}
	tests := []struct {
		name     string
		env      []string
		stdin    string
		wantCode uint
		wantMsg  string
	}{
		{"malformed JSON is a decoding failure", addEnv(func(map[string]string) {}), `{"cniVersion":`, types.ErrDecodingFailure, "unmarshal"},
		{"an unknown CNI version is incompatible", addEnv(func(map[string]string) {}), conf("9.9.9", node.Socket), types.ErrIncompatibleCNIVersion, "incompatible CNI versions"},
		{"a missing netns is an invalid environment", addEnv(func(e map[string]string) { e["CNI_NETNS"] = "" }), conf("1.0.0", node.Socket), types.ErrInvalidEnvironmentVariables, "CNI_NETNS"},
		{"an ifname longer than 15 bytes is an invalid environment", addEnv(func(e map[string]string) { e["CNI_IFNAME"] = "eth0123456789012" }), conf("1.0.0", node.Socket), types.ErrInvalidEnvironmentVariables, "interface name is too long"},
		{"a netns path that does not exist is an invalid netns", addEnv(func(e map[string]string) { e["CNI_NETNS"] = "/var/run/netns/nodenet-no-such-ns" }), conf("1.0.0", node.Socket), types.ErrInvalidNetNS, "nodenet-no-such-ns"},
		{"an agent socket that does not exist says try again later", addEnv(func(map[string]string) {}), conf("1.0.0", filepath.Join(node.Dir, "absent.sock")), types.ErrTryAgainLater, "agent is not reachable"},
		{"STATUS with no agent says not available", addEnv(func(e map[string]string) { e["CNI_COMMAND"] = "STATUS" }), conf("1.1.0", filepath.Join(node.Dir, "absent.sock")), types.ErrPluginNotAvailable, "agent is not reachable"},
		{"GC with an old config version is incompatible", addEnv(func(e map[string]string) { e["CNI_COMMAND"] = "GC" }), conf("1.0.0", node.Socket), types.ErrIncompatibleCNIVersion, "GC"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, cniErr := runPlugin(t, tt.env, tt.stdin)
			if cniErr == nil {
				t.Fatalf("plugin succeeded: %s", out)
			}
			if cniErr.Code != tt.wantCode || !strings.Contains(cniErr.Msg+" "+cniErr.Details, tt.wantMsg) {
				t.Errorf("got code %d %q (%s), want code %d mentioning %q", cniErr.Code, cniErr.Msg, cniErr.Details, tt.wantCode, tt.wantMsg)
			}
			if got := node.allocations(); len(got) != 0 {
				t.Errorf("allocations left: %v", got)
			}
			if got := node.bridgePorts(t); len(got) != 0 {
				t.Errorf("bridge ports left: %v", got)
			}
		})
	}

	t.Run("VERSION lists the supported spec versions", func(t *testing.T) {
		out, cniErr := runPlugin(t, []string{"CNI_COMMAND=VERSION"}, "")
		if cniErr != nil {
			t.Fatal(cniErr)
		}
		for _, v := range []string{"0.3.1", "0.4.0", "1.0.0", "1.1.0"} {
			if !strings.Contains(out, `"`+v+`"`) {
				t.Errorf("VERSION output lacks %s: %s", v, out)
			}
		}
	})

	// Callers other than the plugin reach the socket too; the server checks
	// for itself.
	direct := []struct {
		name     string
		req      api.Request
		wantCode uint
	}{
		{"the server refuses an ifname longer than 15 bytes", api.Request{Command: "ADD", ContainerID: "c", Netns: pod.Path, IfName: "eth0123456789012", Config: []byte(conf("1.0.0", ""))}, types.ErrInvalidEnvironmentVariables},
		{"the server refuses ADD without a netns", api.Request{Command: "ADD", ContainerID: "c", IfName: "eth0", Config: []byte(conf("1.0.0", ""))}, types.ErrInvalidEnvironmentVariables},
		{"the server refuses an unknown command", api.Request{Command: "REBOOT", Config: []byte(conf("1.0.0", ""))}, types.ErrInvalidEnvironmentVariables},
		{"the server refuses a config that is not JSON", api.Request{Command: "DEL", ContainerID: "c", IfName: "eth0", Config: []byte(`"nope"`)}, types.ErrDecodingFailure},
		{"the server refuses a request over its size limit", api.Request{Command: "ADD", ContainerID: "c", Netns: pod.Path, IfName: "eth0", Config: bigConfig()}, types.ErrDecodingFailure},
	}
	for _, tt := range direct {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := api.Send(context.Background(), node.Socket, &tt.req)
			if err != nil {
				t.Fatalf("send: %v", err)
			}
			if resp.Error == nil || resp.Error.Code != tt.wantCode {
				t.Errorf("got %+v, want code %d", resp.Error, tt.wantCode)
			}
		})
	}
}

// bigConfig is a valid config padded past the server's request limit.
func bigConfig() []byte {
	pad := strings.Repeat("x", api.DefaultMaxRequestBytes)
	return []byte(fmt.Sprintf(`{"cniVersion":"1.0.0","name":"nodenet","pad":%q}`, pad))
}

func TestExhaustedPool(t *testing.T) {
	node := newTestNode(t, "10.244.9.0/29")
	node.startCNI(t, netnode.NodenetCNIOptions{Network: node.nw})
	for i := range 4 {
		node.AddPod(t, fmt.Sprintf("fill-%d", i))
	}
	err := node.Add(t.Context(), node.NewPod(t, "one-too-many"))
	if cniCode(err) != types.ErrTryAgainLater || !strings.Contains(err.Error(), "10.244.9.0/29") {
		t.Errorf("ADD into a full pool: %v (code %d), want code %d naming 10.244.9.0/29", err, cniCode(err), types.ErrTryAgainLater)
	}
	if got := len(node.allocations()); got != 4 {
		t.Errorf("%d allocations, want 4", got)
	}
	if got := len(node.bridgePorts(t)); got != 4 {
		t.Errorf("%d bridge ports, want 4", got)
	}
	if err := node.Status(t.Context()); cniCode(err) != types.ErrPluginNotAvailable {
		t.Errorf("STATUS with a full pool: %v, want code %d", err, types.ErrPluginNotAvailable)
	}
}
