package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestGroup(t *testing.T) {
	t.Run("the first failure stops the other parts and is returned with the part's name", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		g := newGroup(ctx, cancel)
		g.run("waiter", func() error { <-ctx.Done(); return errors.New("stopped") })
		g.run("proxy", func() error { return errors.New("no backend") })
		err := g.wait()
		if err == nil || !strings.HasPrefix(err.Error(), "proxy: no backend") {
			t.Errorf("wait = %v, want the proxy's failure", err)
		}
	})
	t.Run("errors after a shutdown are not failures", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		g := newGroup(ctx, cancel)
		g.run("network", func() error { <-ctx.Done(); return errors.New("informer never synced") })
		cancel()
		if err := g.wait(); err != nil {
			t.Errorf("wait = %v, want nil after a shutdown", err)
		}
	})
}
