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
