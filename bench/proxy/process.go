//go:build linux

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is a proxy under measurement; `ip netns exec` execs it in place,
// so its pid is the proxy's.
type process struct {
	cmd     *exec.Cmd
	logPath string
	started time.Time
	done    chan struct{}
	waitErr error
	// stopOnce: the group is killed once, right after the proxy ends,
	// never later when its id may be another's.
	stopOnce sync.Once
}

// startProcess runs argv with env appended, output to logPath. The start
// time is taken just before the fork: the proxy's clock starts there.
func startProcess(argv, env []string, logPath string) (*process, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create log: %w", err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group, so a stop also ends the nft runs it left.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	p := &process{cmd: cmd, logPath: logPath, done: make(chan struct{})}
	started := make(chan error)
	// Pdeathsig fires when the forking thread exits, so that thread must
	// live as long as the child: it is locked here and never released
	// to another goroutine.
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		p.started = time.Now()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.waitErr = cmd.Wait()
		log.Close()
		close(p.done)
	}()
	if err := <-started; err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	return p, nil
}

// exited returns an error describing the exit once the process is gone.
func (p *process) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("proxy exited: %v\n%s", p.waitErr, p.tail())
	default:
		return nil
	}
}

// stop asks the proxy to leave, then kills it, and then whatever it
// left running in its process group (an nft run in flight).
func (p *process) stop() { p.stopOnce.Do(p.doStop) }

func (p *process) doStop() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

func (p *process) tail() string {
	data, _ := os.ReadFile(p.logPath)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return "--- " + p.logPath + " ---\n" + strings.Join(lines, "\n")
}

// peakRSS returns the process's VmHWM: the kernel's high-water mark of its
// resident set, so one read just before it stops sees the whole run.
func (p *process) peakRSS() (bytesUsed int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse VmHWM %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", p.cmd.Process.Pid)
}
