package agent

import (
	"errors"
	"testing"
)

func TestAgentNamespaceOrder(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == PodNamespaceEnv {
				return v
			}
			return ""
		}
	}
	file := func(content string, err error) func(string) ([]byte, error) {
		return func(string) ([]byte, error) { return []byte(content), err }
	}
	notThere := errors.New("no such file")
	tests := []struct {
		name     string
		getenv   func(string) string
		readFile func(string) ([]byte, error)
		want     string
	}{
		{"POD_NAMESPACE wins over the service account file", env("from-env"), file("from-file", nil), "from-env"},
		{"the service account file is next", env(""), file("from-file\n", nil), "from-file"},
		{"deploy's namespace when neither says", env(" "), file("", notThere), DefaultAgentNamespace},
		{"an empty service account file is no answer", env(""), file("  ", nil), DefaultAgentNamespace},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := agentNamespace(tt.getenv, tt.readFile); got != tt.want {
				t.Errorf("agentNamespace = %q, want %q", got, tt.want)
			}
		})
	}
}
