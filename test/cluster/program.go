package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/nodenet/nodenet/test/netnode"
)

// fatal is what Program.Fatal panics with; RunProgram recovers it.
type fatal struct{}

// Program is a netnode.TB for programs. Fatal and Fatalf panic, and
// RunProgram recovers, so they must be called on the goroutine that runs
// RunProgram's fn, as tests call them on the test's goroutine.
type Program struct {
	ctx context.Context
	log io.Writer

	mu       sync.Mutex
	cleanups []func()
	errs     []error
}

var _ netnode.TB = (*Program)(nil)

// RunProgram calls fn with a Program, then runs the cleanups fn
// registered, last first, also when fn called Fatal or panicked. It
// returns the errors reported (Errorf, Fatalf), joined. ctx is what
// Context returns; cancel it (on a signal) to make waits fail. Logs go to
// log.
func RunProgram(ctx context.Context, log io.Writer, fn func(p *Program)) error {
	p := &Program{ctx: ctx, log: log}
	func() {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(fatal); !ok {
					p.runCleanups()
					panic(r)
				}
			}
		}()
		fn(p)
	}()
	p.runCleanups()
	p.mu.Lock()
	defer p.mu.Unlock()
	return errors.Join(p.errs...)
}

func (p *Program) runCleanups() {
	for {
		p.mu.Lock()
		if len(p.cleanups) == 0 {
			p.mu.Unlock()
			return
		}
		f := p.cleanups[len(p.cleanups)-1]
		p.cleanups = p.cleanups[:len(p.cleanups)-1]
		p.mu.Unlock()
		func() {
			// A cleanup that calls Fatal ends itself, not the others.
			defer func() {
				if r := recover(); r != nil {
					if _, ok := r.(fatal); !ok {
						p.Errorf("cleanup panicked: %v", r)
					}
				}
			}()
			f()
		}()
	}
}

// Helper does nothing: programs have no test line numbers.
func (p *Program) Helper() {}

// Cleanup registers f to run when RunProgram's fn is done.
func (p *Program) Cleanup(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cleanups = append(p.cleanups, f)
}

// Context is RunProgram's ctx.
func (p *Program) Context() context.Context { return p.ctx }

// TempDir makes a directory removed at cleanup.
func (p *Program) TempDir() string {
	dir, err := os.MkdirTemp("", "nodenet-program-")
	if err != nil {
		p.Fatalf("temp dir: %v", err)
	}
	p.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Logf writes a line to the log.
func (p *Program) Logf(format string, args ...any) {
	fmt.Fprintf(p.log, format+"\n", args...)
}

// Errorf logs and records an error; the program goes on.
func (p *Program) Errorf(format string, args ...any) {
	err := fmt.Errorf(format, args...)
	p.Logf("error: %v", err)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs = append(p.errs, err)
}

// Fatal is Errorf with Sprint's formatting, then ends fn.
func (p *Program) Fatal(args ...any) {
	p.Errorf("%s", fmt.Sprint(args...))
	panic(fatal{})
}

// Fatalf is Errorf, then ends fn.
func (p *Program) Fatalf(format string, args ...any) {
	p.Errorf(format, args...)
	panic(fatal{})
}
