package source

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
)

func TestParseSpec(t *testing.T) {
	tests := []struct {
		spec    string
		want    Spec
		wantErr string
	}{
		{spec: "", want: Spec{Kind: Kubernetes}},
		{spec: "kubernetes", want: Spec{Kind: Kubernetes}},
		{spec: "files:/etc/nodenet/manifests", want: Spec{Kind: Files, Dir: "/etc/nodenet/manifests"}},
		{spec: `files:C:\nodenet\manifests`, want: Spec{Kind: Files, Dir: `C:\nodenet\manifests`}},
		{spec: "files:", wantErr: `source "files:": files needs a folder`},
		{spec: "file:/tmp", wantErr: `source "file:/tmp": want "kubernetes" or "files:DIR"`},
		{spec: "Kubernetes", wantErr: `source "Kubernetes"`},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got, err := Parse(tt.spec)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Parse = %+v, want %+v", got, tt.want)
			}
			if back, _ := Parse(got.String()); back != got {
				t.Errorf("String() %q does not parse back", got.String())
			}
		})
	}
}

func TestSpecNew(t *testing.T) {
	tests := []struct {
		name    string
		spec    Spec
		opts    Options
		want    string // the source's type
		wantErr string
	}{
		{name: "kubernetes with a client reads the cluster", spec: Spec{Kind: Kubernetes}, opts: Options{Client: fake.NewClientset(), NodeName: "node-a"}, want: "*source.informerSource"},
		{name: "files needs no client", spec: Spec{Kind: Files, Dir: "/m"}, opts: Options{NodeName: "node-a"}, want: "*source.filesSource"},
		{name: "kubernetes without a client is an error", spec: Spec{Kind: Kubernetes}, opts: Options{NodeName: "node-a"}, wantErr: "kubernetes needs a client"},
		{name: "no node name is an error", spec: Spec{Kind: Files, Dir: "/m"}, wantErr: "no node name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := tt.spec.New(tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprintf("%T", src); got != tt.want {
				t.Errorf("source %s, want %s", got, tt.want)
			}
		})
	}
	if (Spec{Kind: Files}).UsesCluster() || !(Spec{Kind: Kubernetes}).UsesCluster() {
		t.Errorf("UsesCluster: files must not, kubernetes must")
	}
}
