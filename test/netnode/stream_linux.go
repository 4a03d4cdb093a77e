package netnode

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"
)

// StreamOptions configure StartStream.
type StreamOptions struct {
	// Server and Client are where the two ends run (pods, usually).
	Server, Client *NS
	// Addr is the server's address as the client dials it; Port its port.
	Addr netip.Addr
	Port int
	// Interval between two messages; default 50ms.
	Interval time.Duration
	// Stall is how long one message may go unanswered before the stream
	// counts as broken; default 20s. TCP retransmits through short
	// outages, so only a long one, or a reset, breaks a stream.
	Stall time.Duration
}

// Stream is one long-lived TCP connection: the client sends a counter
// every Interval and the server echoes it. It tells whether that same
// connection is still passing data, which is what a dataplane restart
// must not disturb.
type Stream struct {
	opts   StreamOptions
	conn   net.Conn // client end
	server net.Conn
	l      net.Listener

	mu        sync.Mutex
	exchanges int
	err       error
	changed   chan struct{} // closed and replaced on every change

	stop     chan struct{}
	stopOnce sync.Once
	done     sync.WaitGroup
}

// StartStream connects and starts exchanging; it stops in t.Cleanup.
func StartStream(t TB, opts StreamOptions) *Stream {
	t.Helper()
	if opts.Interval <= 0 {
		opts.Interval = 50 * time.Millisecond
	}
	if opts.Stall <= 0 {
		opts.Stall = 20 * time.Second
	}
	l, err := opts.Server.Listen(opts.Port)
	if err != nil {
		t.Fatalf("netnode: stream listen in %s: %v", opts.Server.Name, err)
	}
	s := &Stream{opts: opts, l: l, changed: make(chan struct{}), stop: make(chan struct{})}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	conn, err := opts.Client.Dial(t.Context(), opts.Addr, opts.Port)
	if err != nil {
		l.Close()
		t.Fatalf("netnode: stream %s -> %s:%d: %v", opts.Client.Name, opts.Addr, opts.Port, err)
	}
	s.conn = conn
	server, ok := <-accepted
	s.server = server
	if !ok {
		conn.Close()
		l.Close()
		t.Fatalf("netnode: stream server in %s accepted nothing", opts.Server.Name)
	}
	s.done.Add(2)
	go s.echo()
	go s.send()
	t.Cleanup(s.Close)
	return s
}

// echo is the server: it writes back what it reads.
func (s *Stream) echo() {
	defer s.done.Done()
	_, _ = io.Copy(s.server, s.server)
}

// send is the client loop.
func (s *Stream) send() {
	defer s.done.Done()
	ticker := time.NewTicker(s.opts.Interval)
	defer ticker.Stop()
	out, in := make([]byte, 8), make([]byte, 8)
	for seq := uint64(1); ; seq++ {
		select {
		case <-s.stop:
			return
		case <-ticker.C:
		}
		binary.BigEndian.PutUint64(out, seq)
		_ = s.conn.SetDeadline(time.Now().Add(s.opts.Stall))
		_, err := s.conn.Write(out)
		if err == nil {
			_, err = io.ReadFull(s.conn, in)
		}
		if err == nil && binary.BigEndian.Uint64(in) != seq {
			err = fmt.Errorf("echo %d, want %d", binary.BigEndian.Uint64(in), seq)
		}
		select {
		case <-s.stop:
			return // Close interrupted the exchange; not a failure
		default:
		}
		s.record(err)
		if err != nil {
			return
		}
	}
}

func (s *Stream) record(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.err = fmt.Errorf("stream %s -> %s:%d broke after %d exchanges: %w",
			s.opts.Client.Name, s.opts.Addr, s.opts.Port, s.exchanges, err)
	} else {
		s.exchanges++
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

// Exchanges returns how many round trips completed, and the error that
// ended the stream (nil while it runs).
func (s *Stream) Exchanges() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exchanges, s.err
}

// WaitPassing waits until n more round trips than now complete on the
// same connection; it fails when the stream breaks or timeout passes.
func (s *Stream) WaitPassing(ctx context.Context, n int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	s.mu.Lock()
	want := s.exchanges + n
	s.mu.Unlock()
	for {
		s.mu.Lock()
		got, err, changed := s.exchanges, s.err, s.changed
		s.mu.Unlock()
		switch {
		case err != nil:
			return err
		case got >= want:
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("stream %s -> %s:%d: %d of %d more exchanges within %s",
				s.opts.Client.Name, s.opts.Addr, s.opts.Port, got-(want-n), n, timeout)
		}
	}
}

// Close ends the stream; calling it again does nothing.
func (s *Stream) Close() {
	s.stopOnce.Do(func() {
		close(s.stop)
		s.conn.Close()
		s.server.Close()
		s.l.Close()
		s.done.Wait()
	})
}
