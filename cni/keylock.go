package cni

import "sync"

// keyLock serializes work per key (a container ID) while letting different
// keys run in parallel. Entries are dropped when unused, so the map stays
// as small as the number of requests in flight.
type keyLock struct {
	mu    sync.Mutex
	locks map[string]*keyEntry
}

type keyEntry struct {
	mu   sync.Mutex
	refs int
}

// lock takes key's lock and returns its unlock function.
func (k *keyLock) lock(key string) func() {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyEntry{}
	}
	e := k.locks[key]
	if e == nil {
		e = &keyEntry{}
		k.locks[key] = e
	}
	e.refs++
	k.mu.Unlock()

	e.mu.Lock()
	return k.unlocker(key, e)
}

// tryLock takes key's lock only when nobody holds it or waits for it (no
// request for that container is in flight) and returns its unlock
// function; ok is false, and nothing taken, otherwise.
func (k *keyLock) tryLock(key string) (unlock func(), ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.locks[key] != nil {
		return nil, false
	}
	if k.locks == nil {
		k.locks = map[string]*keyEntry{}
	}
	e := &keyEntry{refs: 1}
	e.mu.Lock() // free: nobody else knows e yet
	k.locks[key] = e
	return k.unlocker(key, e), true
}

func (k *keyLock) unlocker(key string, e *keyEntry) func() {
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		e.refs--
		if e.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}
