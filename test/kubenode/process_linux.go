package kubenode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/nodenet/nodenet/test/netnode"
)

// stopGrace is how long Stop waits after SIGTERM before SIGKILL.
const stopGrace = 15 * time.Second

// Proc is one process the harness runs (a control-plane component, a
// node's containerd, kubelet or agent), logging to LogPath.
type Proc struct {
	*netnode.Process
	Name    string
	LogPath string
}

// startProc runs bin with args, in the network namespace at netnsPath
// unless it is empty. nsenter enters only the network namespace (`ip
// netns exec` would give each a private mount namespace, and kubelet's
// volume mounts must be visible to containerd and runc); it execs in
// place, so the PID is bin's own.
func startProc(name, netnsPath, bin string, args []string, env []string, logPath string) (*Proc, error) {
	return startProcNS(name, netnsPath, "", bin, args, env, logPath)
}

// startProcNS is startProc also entering the mount namespace at
// mountNSPath unless it is empty (an installed node's, see Install).
func startProcNS(name, netnsPath, mountNSPath, bin string, args []string, env []string, logPath string) (*Proc, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close() // the child holds its own descriptor
	fmt.Fprintf(log, "=== %s %s %s\n", time.Now().UTC().Format(time.RFC3339), bin, strings.Join(args, " "))
	var cmd *exec.Cmd
	var ns []string
	if netnsPath != "" {
		ns = append(ns, "--net="+netnsPath)
	}
	if mountNSPath != "" {
		ns = append(ns, "--mount="+mountNSPath)
	}
	if len(ns) == 0 {
		cmd = exec.CommandContext(context.Background(), bin, args...)
	} else {
		cmd = exec.CommandContext(context.Background(), "nsenter", append(append(ns, "--", bin), args...)...)
	}
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	p, err := netnode.StartProcess(cmd)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &Proc{Process: p, Name: name, LogPath: logPath}, nil
}

// Stop sends SIGTERM and waits; SIGKILL follows after a grace period.
// A nil Proc or one that exited is fine.
func (p *Proc) Stop() {
	if p == nil {
		return
	}
	p.Signal(syscall.SIGTERM)
	select {
	case <-p.Done():
	case <-time.After(stopGrace):
		p.Kill()
		<-p.Done()
	}
}

// Exited reports whether the process ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.Done():
		return true
	default:
		return false
	}
}

// LogTail returns the log's last lines, labelled, for failure messages.
func (p *Proc) LogTail(lines int) string {
	return logTail(p.LogPath, lines)
}

func logTail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return fmt.Sprintf("--- last lines of %s ---\n%s", path, strings.Join(all, "\n"))
}
