package netnode

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"
)

// probeTimeout bounds one probe; Eventually retries probes for convergence.
const probeTimeout = 2 * time.Second

// Ping sends one real ICMP echo request from ns to dst and wants a reply.
func (ns *NS) Ping(ctx context.Context, dst netip.Addr) error {
	out, err := ns.Run(ctx, "ping", "-n", "-c", "1", "-W", "1", dst.String())
	if err != nil {
		return fmt.Errorf("ping %s from %s: %w\n%s", dst, ns.Name, err, out)
	}
	return nil
}

// NoPing sends one ICMP echo request from ns to dst and wants no reply
// within a second.
func (ns *NS) NoPing(ctx context.Context, dst netip.Addr) error {
	if ns.Ping(ctx, dst) == nil {
		return fmt.Errorf("ping %s from %s answered; want no answer", dst, ns.Name)
	}
	return nil
}

// Eventually retries check until it succeeds or timeout passes, and
// returns its last error: a convergence wait, not a timing assertion.
func Eventually(ctx context.Context, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not within %s: %w", timeout, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Listen opens a TCP listener on port (all addresses) inside ns.
func (ns *NS) Listen(port int) (net.Listener, error) {
	var l net.Listener
	err := ns.Do(func() error {
		var err error
		l, err = net.Listen("tcp4", net.JoinHostPort("0.0.0.0", strconv.Itoa(port)))
		return err
	})
	return l, err
}

// Dial connects from inside ns to dst:port over TCP.
func (ns *NS) Dial(ctx context.Context, dst netip.Addr, port int) (net.Conn, error) {
	var c net.Conn
	err := ns.Do(func() error {
		d := net.Dialer{Timeout: probeTimeout}
		var err error
		c, err = d.DialContext(ctx, "tcp", netip.AddrPortFrom(dst, uint16(port)).String())
		return err
	})
	return c, err
}

// HTTPTransport is an HTTP transport whose every request opens a new TCP
// connection to dst from inside from (nil: the root namespace), whatever
// the request's URL says: one connection per request, so each request is
// a new flow through the proxy.
func HTTPTransport(from *NS, dst netip.AddrPort) *http.Transport {
	return &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			if from == nil {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", dst.String())
			}
			return from.Dial(ctx, dst.Addr(), int(dst.Port()))
		},
	}
}

// TCPExchange listens on port in server, connects from client to dst:port
// and sends one line each way. dst is the server's address as the client
// sees it.
func TCPExchange(ctx context.Context, client, server *NS, dst netip.Addr, port int) error {
	return TCPExchangeVia(ctx, client, server, dst, port, port)
}

// TCPExchangeVia is TCPExchange where the server listens on listenPort
// and the client dials dialPort, which a NAT (a hostPort, a Service)
// maps to it.
func TCPExchangeVia(ctx context.Context, client, server *NS, dst netip.Addr, dialPort, listenPort int) error {
	l, err := server.Listen(listenPort)
	if err != nil {
		return fmt.Errorf("listen in %s: %w", server.Name, err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(probeTimeout))
		buf := make([]byte, 5)
		if _, err := io.ReadFull(c, buf); err == nil {
			_, _ = c.Write([]byte("pong\n"))
		}
	}()
	c, err := client.Dial(ctx, dst, dialPort)
	if err != nil {
		return fmt.Errorf("%s -> %s:%d: %w", client.Name, dst, dialPort, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(probeTimeout))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return fmt.Errorf("%s -> %s:%d: %w", client.Name, dst, dialPort, err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(c, buf); err != nil {
		return fmt.Errorf("%s -> %s:%d: no reply: %w", client.Name, dst, dialPort, err)
	}
	if string(buf) != "pong\n" {
		return fmt.Errorf("%s -> %s:%d: got %q, want pong", client.Name, dst, dialPort, buf)
	}
	return nil
}

// AnswerUDP serves UDP on addr in the namespace enter runs its function
// in (NS.Do, Pod.Do, or nsexec.Do with a handle), answering every
// datagram with name, until the test ends. Tests of UDP load balancing
// read the name to tell which backend answered.
func AnswerUDP(t TB, enter func(func() error) error, network string, addr *net.UDPAddr, name string) {
	t.Helper()
	var conn *net.UDPConn
	err := enter(func() (err error) {
		conn, err = net.ListenUDP(network, addr)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 64)
		for {
			_, from, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			_, _ = conn.WriteToUDPAddrPort([]byte(name), from)
		}
	}()
}
