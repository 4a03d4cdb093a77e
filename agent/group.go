package agent

import (
	"context"
	"fmt"
	"sync"
)

// group runs the agent's parts; the first to fail stops the others.
// Errors a part returns once ctx is done are the shutdown's doing (an
// informer that never synced, say) and are not failures.
type group struct {
	ctx    context.Context
	cancel func()
	wg     sync.WaitGroup
	mu     sync.Mutex
	err    error
}

func newGroup(ctx context.Context, cancel func()) *group { return &group{ctx: ctx, cancel: cancel} }

// run starts part in a goroutine; its error fails the group.
func (g *group) run(name string, part func() error) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := part(); err != nil && g.ctx.Err() == nil {
			g.fail(fmt.Errorf("%s: %w", name, err))
		}
	}()
}

// fail records err (the first one wins) and stops every part.
func (g *group) fail(err error) {
	g.mu.Lock()
	if g.err == nil {
		g.err = err
	}
	g.mu.Unlock()
	g.cancel()
}

// wait waits for every part and returns the first failure.
func (g *group) wait() error {
	g.wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}
