// Address plan:
//
//	apiserver        127.0.0.2:<random port> (BindAddress; 127/8 is all
//	                 loopback on Linux, so no root is needed, yet it is not
//	                 the default 127.0.0.1)
//	etcd             127.0.0.1:<random ports> (always loopback)
//	rejected values  0.0.0.0, fe80::1%eth0, "not-an-ip"
package apiserver_test

import (
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodenet/nodenet/test/apiserver"
)

const otherLoopback = "127.0.0.2"

func TestBindAddressMovesTheAPIServer(t *testing.T) {
	srv := apiserver.StartForTest(t, apiserver.Options{BindAddress: otherLoopback})
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatalf("parse URL %q: %v", srv.URL, err)
	}

	t.Run("URL names the bind address", func(t *testing.T) {
		if u.Hostname() != otherLoopback {
			t.Errorf("URL %s has host %q, want %s", srv.URL, u.Hostname(), otherLoopback)
		}
	})

	t.Run("a kubeconfig client reaches it with TLS verified for that address", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "kubeconfig")
		if err := srv.WriteKubeconfig(path); err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			t.Fatalf("load kubeconfig: %v", err)
		}
		if cfg.Host != srv.URL || cfg.Insecure {
			t.Errorf("kubeconfig host %q insecure=%v, want %q verified", cfg.Host, cfg.Insecure, srv.URL)
		}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{}); err != nil {
			t.Errorf("get default namespace through %s: %v", srv.URL, err)
		}
	})

	t.Run("nothing listens on the same port at 127.0.0.1", func(t *testing.T) {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", u.Port()), 2*time.Second)
		if err == nil {
			c.Close()
			t.Errorf("127.0.0.1:%s accepts connections; the apiserver should bind %s only", u.Port(), otherLoopback)
		}
	})

	t.Run("etcd stays on loopback", func(t *testing.T) {
		e, err := url.Parse(srv.EtcdURL)
		if err != nil || e.Hostname() != "127.0.0.1" {
			t.Errorf("etcd URL %s (%v), want host 127.0.0.1", srv.EtcdURL, err)
		}
	})
}

// Bad addresses are refused before anything starts, binaries or not.
func TestBindAddressMustBeOneSpecificAddress(t *testing.T) {
	for _, addr := range []string{"0.0.0.0", "fe80::1%eth0", "not-an-ip"} {
		t.Run(addr+" is refused", func(t *testing.T) {
			srv, err := apiserver.Start(t.Context(), apiserver.Options{BindAddress: addr})
			if err == nil {
				srv.Stop()
				t.Fatalf("Start with bind address %q succeeded, want an error", addr)
			}
			if !strings.Contains(err.Error(), "bind address") {
				t.Errorf("error %q does not mention the bind address", err)
			}
		})
	}
}
