package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nodenet/nodenet/config"
	"github.com/nodenet/nodenet/test/netnode"
)

// stopGrace is how long Stop waits after SIGTERM before SIGKILL.
const stopGrace = 10 * time.Second

// AgentOptions adjust one agent run.
type AgentOptions struct {
	// Config, when set, is the config file this run reads instead of
	// the node's (to try a bad one); it is written beside the run's log.
	Config []byte
	// Args are appended to the run's flags.
	Args []string
}

// Agent is one nodenet-agent process. Its PID is the agent's own (`ip
// netns exec` execs in place); Kill ends it as a crash would.
type Agent struct {
	*netnode.Process
	Node *Node
	// Run counts the node's agent runs, from 1.
	Run int
	// LogPath holds the process's stdout and stderr.
	LogPath string
}

// StartAgent starts nodenet-agent inside the node's namespace, as the
// DaemonSet would (NODE_NAME set, the config file and the kubeconfig
// named), and stops it in t's cleanup unless it ended before. It does
// not wait; see WaitReady.
func (n *Node) StartAgent(t netnode.TB, opts AgentOptions) *Agent {
	t.Helper()
	a, err := n.startAgent(opts)
	if err != nil {
		t.Fatalf("cluster: %v", err)
	}
	t.Cleanup(func() {
		a.Stop()
		if f, ok := t.(interface{ Failed() bool }); ok && f.Failed() {
			t.Logf("%s", a.LogTail(60))
		}
	})
	return a
}

func (n *Node) startAgent(opts AgentOptions) (*Agent, error) {
	n.runs++
	a := &Agent{Node: n, Run: n.runs, LogPath: filepath.Join(n.Dir, fmt.Sprintf("agent-%d.log", n.runs))}
	cfgPath := n.ConfigPath
	if opts.Config != nil {
		cfgPath = filepath.Join(n.Dir, fmt.Sprintf("agent-%d.yaml", n.runs))
		if err := os.WriteFile(cfgPath, opts.Config, 0o600); err != nil {
			return nil, err
		}
	}
	log, err := os.Create(a.LogPath)
	if err != nil {
		return nil, err
	}
	defer log.Close() // the child holds its own descriptor
	args := []string{
		"--config", cfgPath,
		"--kubeconfig", n.Cluster.Kubeconfig,
		"--dataplane", n.Dataplane,
	}
	args = append(args, n.Cluster.opts.AgentArgs...)
	args = append(args, opts.Args...)
	// Its lifetime is the Agent's (Kill, Stop), not a context's.
	cmd := n.Command(context.Background(), filepath.Join(n.Cluster.BinDir, AgentBinary), args...)
	cmd.Env = append(os.Environ(), config.NodeNameEnv+"="+n.Name)
	cmd.Stdout, cmd.Stderr = log, log
	p, err := netnode.StartProcess(cmd)
	if err != nil {
		return nil, fmt.Errorf("agent on %s: %w", n.Name, err)
	}
	a.Process = p
	n.Agent = a
	return a, nil
}

// Stop sends SIGTERM, the graceful shutdown a DaemonSet update does, and
// waits; SIGKILL follows after a grace period.
func (a *Agent) Stop() {
	a.Signal(syscall.SIGTERM)
	select {
	case <-a.Done():
	case <-time.After(stopGrace):
		a.Kill()
	}
}

// Wait waits for the process to exit, at most timeout; it reports
// whether it did.
func (a *Agent) Wait(timeout time.Duration) bool {
	select {
	case <-a.Done():
		return true
	case <-time.After(timeout):
		return false
	}
}

// Log returns everything the run wrote.
func (a *Agent) Log() string {
	data, err := os.ReadFile(a.LogPath)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	return string(data)
}

// LogTail returns the run's last lines, labelled, for failure messages.
func (a *Agent) LogTail(lines int) string {
	all := strings.Split(strings.TrimRight(a.Log(), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return fmt.Sprintf("--- last lines of %s (agent run %d on %s) ---\n%s", a.LogPath, a.Run, a.Node.Name, strings.Join(all, "\n"))
}
