package cluster

import (
	"fmt"
	"os/exec"
	"runtime"
	"syscall"
)

// Process is a child that the kernel kills when this process dies.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once it exited
	err  error         // Wait's; valid after done
}

// StartProcess starts cmd with a parent-death signal. The signal fires
// when the thread that forked exits, not the process, so the fork and the
// wait happen on one goroutine that keeps its OS thread to itself (netns
// helpers lock and retire threads; one of those must never be the
// parent).
func StartProcess(cmd *exec.Cmd) (*Process, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	p := &Process{cmd: cmd, done: make(chan struct{})}
	started := make(chan error)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	return p, nil
}

// signal sends sig unless the process already exited.
func (p *Process) signal(sig syscall.Signal) {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(sig)
	}
}

// exitCode is the exit status after done: -1 when killed by a signal.
func (p *Process) exitCode() int {
	return p.cmd.ProcessState.ExitCode()
}

// Done is closed once the process exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is Wait's result, valid after Done.
func (p *Process) Err() error { return p.err }
