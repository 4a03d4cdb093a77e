package apiserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

const pollInterval = 100 * time.Millisecond

// waitReady polls check until it succeeds, the process dies, or the timeout
// passes; failures carry the tail of the process log.
func waitReady(ctx context.Context, p *process, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return p.exitError()
		case <-ctx.Done():
			return fmt.Errorf("%s not ready within %s (last check: %v): %w\n%s",
				p.name, timeout, err, ctx.Err(), p.tail())
		case <-ticker.C:
		}
	}
}

// getOK sends one GET and wants 200; the body of any other answer explains
// why the server is not ready yet.
func getOK(ctx context.Context, client *http.Client, url, token string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
