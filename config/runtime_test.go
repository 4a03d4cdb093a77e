package config

import (
	"strings"
	"testing"
)

func TestParseRuntimeEndpoint(t *testing.T) {
	tests := []struct {
		name     string
		os       OS
		endpoint string
		want     RuntimeEndpoint
		wantErr  string
	}{
		{
			name:     "containerd's socket on Linux is a unix socket path",
			os:       OSLinux,
			endpoint: DefaultRuntimeEndpointLinux,
			want:     RuntimeEndpoint{Network: "unix", Address: "/run/containerd/containerd.sock"},
		},
		{
			name:     "containerd's pipe on Windows is named as Windows spells it",
			os:       OSWindows,
			endpoint: DefaultRuntimeEndpointWindows,
			want:     RuntimeEndpoint{Network: "npipe", Address: `\\.\pipe\containerd-containerd`},
		},
		{
			name:     "a pipe written with two slashes or backslashes is the same pipe",
			os:       OSWindows,
			endpoint: `npipe://\\.\pipe\containerd-containerd`,
			want:     RuntimeEndpoint{Network: "npipe", Address: `\\.\pipe\containerd-containerd`},
		},
		{
			name:     "a unix socket with a Windows path works on Windows",
			os:       OSWindows,
			endpoint: "unix://C:/run/containerd.sock",
			want:     RuntimeEndpoint{Network: "unix", Address: "C:/run/containerd.sock"},
		},
		{
			name:     "a bare path needs its scheme",
			os:       OSLinux,
			endpoint: "/run/containerd/containerd.sock",
			wantErr:  "must start with unix://",
		},
		{
			name:     "tcp is not a runtime endpoint",
			os:       OSWindows,
			endpoint: "tcp://127.0.0.1:3735",
			wantErr:  "must start with npipe:// or unix://",
		},
		{
			name:     "a relative socket path is an error",
			os:       OSLinux,
			endpoint: "unix://run/containerd.sock",
			wantErr:  "absolute socket path on linux",
		},
		{
			name:     "a socket path longer than sun_path is an error",
			os:       OSLinux,
			endpoint: "unix:///" + strings.Repeat("a", MaxSocketPathLength),
			wantErr:  "longer than 107 bytes",
		},
		{
			name:     "a named pipe on Linux is an error",
			os:       OSLinux,
			endpoint: DefaultRuntimeEndpointWindows,
			wantErr:  "named pipes exist only on Windows",
		},
		{
			name:     "a pipe without a name is an error",
			os:       OSWindows,
			endpoint: "npipe:////./pipe/",
			wantErr:  "must name a pipe",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRuntimeEndpoint(tt.os, tt.endpoint)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseRuntimeEndpoint(%q) = %+v, %v; want an error containing %q", tt.endpoint, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ParseRuntimeEndpoint(%q) = %+v, %v; want %+v", tt.endpoint, got, err, tt.want)
			}
		})
	}
}
