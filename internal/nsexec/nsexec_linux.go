package nsexec

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// Do runs fn inside target and returns fn's error. What fn opens there
// (sockets, /proc/sys/net files) stays in target after it returns;
// processes it starts inherit target. A thread that cannot be moved back
// stays locked to its goroutine, so the runtime retires it with the
// goroutine instead of reusing it in the wrong namespace. fn runs on
// another goroutine: it must return its failure, not call t.Fatal.
func Do(target netns.NsHandle, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("open this thread's network namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(target); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("enter network namespace %s: %w", target, err)
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			done <- fmt.Errorf("return from network namespace %s: %w", target, err)
			return // the thread stays locked and dies with the goroutine
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
}

// New creates an unnamed network namespace and returns a handle to it
// without moving the caller: the thread that creates it (netns.New enters
// the new namespace) stays locked and is retired with its goroutine. The
// kernel frees the namespace when the handle is closed and nothing else
// uses it.
func New() (netns.NsHandle, error) {
	type result struct {
		ns  netns.NsHandle
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: this thread's namespace changed
		ns, err := netns.New()
		if err != nil {
			err = fmt.Errorf("create a network namespace: %w", err)
		}
		done <- result{ns, err}
	}()
	r := <-done
	return r.ns, r.err
}
