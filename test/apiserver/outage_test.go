// Address plan: the apiserver and etcd on 127.0.0.1 at random ports;
// ConfigMap default/kept is the object that must outlive the outage.
package apiserver_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodenet/nodenet/test/apiserver"
)

func TestAnAPIOutageKeepsTheURLAndTheObjects(t *testing.T) {
	srv := apiserver.StartForTest(t, apiserver.Options{})
	ctx := t.Context()
	client := srv.Client()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kept"}}
	if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	url := srv.URL

	srv.StopAPIServer()
	if _, err := client.CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{}); err == nil {
		t.Fatal("the apiserver answered while stopped")
	}
	if err := srv.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.StartAPIServer(ctx); err == nil {
		t.Error("a second StartAPIServer while running succeeded")
	}

	if srv.URL != url {
		t.Errorf("URL moved from %s to %s", url, srv.URL)
	}
	// The client made before the outage works again: same address,
	// certificate and token.
	if _, err := client.CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Errorf("after the outage: %v", err)
	}
}
