package apiserver

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
)

// tailLines is how much of a process log an error carries.
const tailLines = 40

// process is a child whose output goes to a log file.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	log     *os.File
	done    chan struct{} // closed once the process has exited
	waitErr error         // valid after done is closed
	stopped sync.Once
}

func startProcess(name, bin string, args []string, logPath string) (*process, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create %s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = log
	cmd.Stderr = log
	cmd.SysProcAttr = sysProcAttr()
	p := &process{name: name, logPath: logPath, cmd: cmd, log: log, done: make(chan struct{})}
	started := make(chan error)
	go p.run(started)
	if err := <-started; err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return p, nil
}

// run starts the process and waits for it on one locked OS thread: the
// parent-death signal fires when the forking thread exits, and a thread that
// some other goroutine locks and abandons (netns helpers do) would kill the
// child with it, so this goroutine keeps the thread to itself.
func (p *process) run(started chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := p.cmd.Start(); err != nil {
		started <- err
		return
	}
	started <- nil
	p.waitErr = p.cmd.Wait()
	close(p.done)
}

// exitError describes how the process ended; call only after done is closed.
func (p *process) exitError() error {
	if p.waitErr != nil {
		return fmt.Errorf("%s exited: %w\n%s", p.name, p.waitErr, p.tail())
	}
	return fmt.Errorf("%s exited early with status 0\n%s", p.name, p.tail())
}

// stop kills the process (tests need no graceful shutdown) and waits for it.
func (p *process) stop() {
	p.stopped.Do(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		p.log.Close()
	})
}

// tail returns the last lines of the log, labelled for error messages.
func (p *process) tail() string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(%s log unreadable: %v)", p.name, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > tailLines {
		lines = lines[len(lines)-tailLines:]
	}
	return fmt.Sprintf("--- last lines of %s ---\n%s", p.logPath, strings.Join(lines, "\n"))
}

// portClash reports whether the process failed because a port it was given
// was taken between our probe and its bind (another test package won).
func (p *process) portClash() bool {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return false
	}
	return bytes.Contains(data, []byte("address already in use")) ||
		bytes.Contains(data, []byte("Only one usage of each socket address"))
}
