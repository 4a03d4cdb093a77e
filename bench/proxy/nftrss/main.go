//go:build linux

// Command nftrss stands in for nft on a benchmarked proxy's PATH: it runs
// the real nft with the same arguments and standard streams, then appends
// one JSON line (peak RSS, wall time, exit status) to a log. wait4's
// rusage is exact where polling /proc would miss a short nft's peak, and
// the proxies need no change to be measured.
//
// A run that reads a file also logs how many bytes it read on stdin (the
// proxies pipe their transactions in with -f -).
//
// Environment: NODENET_BENCH_NFT is the real nft, NODENET_BENCH_NFT_LOG
// the log to append to.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"time"
)

// Call is one logged nft run; bench/proxy reads these lines.
type Call struct {
	Start    time.Time `json:"start"`
	Seconds  float64   `json:"seconds"`
	MaxRSSKB int64     `json:"maxRSSKiB"`
	Exit     int       `json:"exit"`
	Args     []string  `json:"args"`
	// StdinBytes is what a run that reads a file (-f) read on stdin:
	// the size of the transaction a proxy piped in.
	StdinBytes int64 `json:"stdinBytes,omitempty"`
}

// counter counts what passes through it.
type counter struct {
	r io.Reader
	n int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func main() {
	real := os.Getenv("NODENET_BENCH_NFT")
	if real == "" {
		real = "/usr/sbin/nft"
	}
	cmd := exec.Command(real, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	var stdin *counter
	if slices.Contains(os.Args[1:], "-f") || slices.Contains(os.Args[1:], "--file") {
		stdin = &counter{r: os.Stdin}
		cmd.Stdin = stdin
		// A parent that keeps stdin open must not hold the wrapper.
		cmd.WaitDelay = time.Second
	}
	start := time.Now()
	err := cmd.Run()
	call := Call{Start: start, Seconds: time.Since(start).Seconds(), Args: os.Args[1:]}
	if stdin != nil {
		call.StdinBytes = stdin.n
	}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		call.Exit = exitErr.ExitCode()
	default:
		fmt.Fprintf(os.Stderr, "nftrss: %v\n", err)
		os.Exit(127)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		call.MaxRSSKB = ru.Maxrss // kilobytes on Linux
	}
	if path := os.Getenv("NODENET_BENCH_NFT_LOG"); path != "" {
		if err := appendLine(path, call); err != nil {
			fmt.Fprintf(os.Stderr, "nftrss: %v\n", err)
		}
	}
	os.Exit(call.Exit)
}

// appendLine writes one line with a single write on an O_APPEND file, so
// concurrent nft runs don't interleave.
func appendLine(path string, call Call) error {
	line, err := json.Marshal(call)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(line, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
