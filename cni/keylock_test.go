package cni

import (
	"sync"
	"sync/atomic"
	"testing"
)

func TestKeyLock(t *testing.T) {
	t.Run("one key is held by one goroutine at a time", func(t *testing.T) {
		var k keyLock
		var inside, maxInside atomic.Int32
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				unlock := k.lock("c1")
				n := inside.Add(1)
				for {
					m := maxInside.Load()
					if n <= m || maxInside.CompareAndSwap(m, n) {
						break
					}
				}
				inside.Add(-1)
				unlock()
			})
		}
		wg.Wait()
		if got := maxInside.Load(); got != 1 {
			t.Errorf("%d goroutines held the same key at once, want 1", got)
		}
	})
	t.Run("different keys do not block each other", func(t *testing.T) {
		var k keyLock
		unlockA := k.lock("a")
		done := make(chan struct{})
		go func() {
			k.lock("b")()
			close(done)
		}()
		<-done // would deadlock if "b" waited for "a"
		unlockA()
	})
	t.Run("unused keys are forgotten", func(t *testing.T) {
		var k keyLock
		for _, key := range []string{"a", "b", "c"} {
			k.lock(key)()
		}
		if n := len(k.locks); n != 0 {
			t.Errorf("%d keys left in the map after every lock was released", n)
		}
	})
	t.Run("tryLock fails while a request holds or waits for the key", func(t *testing.T) {
		var k keyLock
		unlock := k.lock("c1")
		if _, ok := k.tryLock("c1"); ok {
			t.Fatal("tryLock took a held key")
		}
		waiting := make(chan struct{})
		go func() {
			k.lock("c1")() // waits for unlock
			close(waiting)
		}()
		unlock()
		<-waiting
		unlockTry, ok := k.tryLock("c1")
		if !ok {
			t.Fatal("tryLock failed on a free key")
		}
		blocked := make(chan struct{})
		go func() {
			k.lock("c1")() // a request arriving now waits for the try lock
			close(blocked)
		}()
		unlockTry()
		<-blocked
		if n := len(k.locks); n != 0 {
			t.Errorf("%d keys left in the map after every lock was released", n)
		}
	})
}
