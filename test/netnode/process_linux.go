package netnode

import (
	"fmt"
	"os/exec"
	"runtime"
	"syscall"
)

// Process is a child that the kernel kills when this process dies: every
// process a test starts in a node (an agent, a CNI server, flanneld) is
// one, so a killed test binary leaves none behind.
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

// Signal sends sig unless the process already exited.
func (p *Process) Signal(sig syscall.Signal) {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(sig)
	}
}

// Kill sends SIGKILL and waits: the process gets no chance to clean up,
// as in a crash or an OOM kill. It does nothing after the process ended.
func (p *Process) Kill() {
	p.Signal(syscall.SIGKILL)
	<-p.done
}

// PID is the process ID.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done is closed once the process exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is Wait's result, valid after Done.
func (p *Process) Err() error { return p.err }

// ExitCode is the exit status after Done, -1 when a signal ended it.
func (p *Process) ExitCode() int { return p.cmd.ProcessState.ExitCode() }
