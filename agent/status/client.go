package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// DefaultTimeout bounds one request to the agent, from dial to the last
// byte of the answer, when Client.Timeout is zero.
const DefaultTimeout = 5 * time.Second

// maxErrorBody is how much of a non-200 answer an error quotes.
const maxErrorBody = 512

// SocketPath returns the local API socket's path for an agent whose CNI
// socket is cniSocketPath (config cni.socketPath): the same directory,
// named SocketName. Server and client both derive it this way.
func SocketPath(cniSocketPath string) string {
	return filepath.Join(filepath.Dir(cniSocketPath), SocketName)
}

// Client reads a running agent's local API over its unix socket. It is
// safe for concurrent use.
type Client struct {
	// Timeout bounds each request; zero means DefaultTimeout.
	Timeout time.Duration

	socketPath string
	http       *http.Client
}

// NewClient returns a Client for the agent listening on socketPath. It
// does not connect: each call dials, so a Client outlives agent restarts.
func NewClient(socketPath string) *Client {
	dialer := &net.Dialer{}
	return &Client{
		socketPath: socketPath,
		http: &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return dialer.DialContext(ctx, "unix", socketPath)
			},
			// One short request per command: keeping idle connections
			// only holds a file descriptor in the agent.
			DisableKeepAlives: true,
		}},
	}
}

// SocketPath returns the socket the client talks to.
func (c *Client) SocketPath() string { return c.socketPath }

// Status returns the agent's view of this node.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	var s Status
	if err := c.get(ctx, PathStatus, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Services returns the service ports the agent's proxy programmed.
func (c *Client) Services(ctx context.Context) (*Services, error) {
	var s Services
	if err := c.get(ctx, PathServices, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Dump returns what the agent's dataplane holds.
func (c *Client) Dump(ctx context.Context) (*Dump, error) {
	var d Dump
	if err := c.get(ctx, PathDump, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

func (c *Client) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

// get fetches path and decodes its JSON answer into into. Unknown fields
// are ignored so that a newer agent still answers an older nodenetctl.
func (c *Client) get(ctx context.Context, path string, into any) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	// The host is ignored (the transport dials the socket) but must be
	// valid; "agent" reads well in errors.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent"+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.requestError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		msg := strings.TrimSpace(string(body))
		if resp.StatusCode == http.StatusNotFound {
			return fmt.Errorf("the agent at %s does not serve %s (is it an older version than nodenetctl?): %s", c.socketPath, path, resp.Status)
		}
		if msg == "" {
			return fmt.Errorf("the agent at %s answered GET %s with %s", c.socketPath, path, resp.Status)
		}
		return fmt.Errorf("the agent at %s answered GET %s with %s: %s", c.socketPath, path, resp.Status, msg)
	}
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		return c.requestError(ctx, fmt.Errorf("decode the agent's answer to GET %s: %w", path, err))
	}
	return nil
}

// requestError turns a failed request into what an operator needs to
// know: is there an agent, may I talk to it, did it hang. The original
// error stays wrapped (errors.Is works with fs.ErrNotExist,
// fs.ErrPermission and context.DeadlineExceeded).
func (c *Client) requestError(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("the agent at %s did not answer within %v: %w", c.socketPath, c.timeout(), context.DeadlineExceeded)
	}
	var opErr *net.OpError
	if !errors.As(err, &opErr) || opErr.Op != "dial" {
		return err
	}
	// Stat the socket rather than trusting the dial's errno: Windows
	// reports a missing AF_UNIX socket and a refused one with winsock
	// codes that errors.Is doesn't map.
	_, statErr := os.Stat(c.socketPath)
	switch {
	case errors.Is(statErr, fs.ErrNotExist):
		return &socketError{err: fs.ErrNotExist, msg: fmt.Sprintf("is the agent running on this node? no socket at %s", c.socketPath)}
	case errors.Is(statErr, fs.ErrPermission) || errors.Is(err, fs.ErrPermission):
		return &socketError{err: fs.ErrPermission, msg: fmt.Sprintf("permission denied on %s: the agent's socket is for %s only", c.socketPath, privileged())}
	}
	return &socketError{err: err, msg: fmt.Sprintf("is the agent running on this node? nothing answers on %s (a socket left by a stopped agent?): %v", c.socketPath, err)}
}

// privileged names who may use the socket on this OS.
func privileged() string {
	if runtime.GOOS == "windows" {
		return "Administrators; run nodenetctl from an elevated prompt"
	}
	return "root; run nodenetctl as root (sudo)"
}

// socketError is a failure to reach the agent's socket.
type socketError struct {
	msg string
	err error
}

func (e *socketError) Error() string { return e.msg }
func (e *socketError) Unwrap() error { return e.err }

// IsUnreachable reports whether err means the agent could not be reached
// at all (no socket, no permission, nothing listening, no answer), as
// opposed to an agent that answered with an error.
func IsUnreachable(err error) bool {
	var se *socketError
	return errors.As(err, &se) || errors.Is(err, context.DeadlineExceeded)
}
