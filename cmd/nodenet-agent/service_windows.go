package main

import (
	"context"
	"errors"

	"golang.org/x/sys/windows/svc"

	"github.com/nodenet/nodenet/agent"
)

// serviceName is the agent's Windows service name.
const serviceName = "nodenet"

// serviceSupported: windows.runAsService is honored here.
const serviceSupported = true

// runAsService runs the agent under the service control manager
// (windows.runAsService): a stop or a system shutdown is a graceful
// shutdown, like SIGTERM.
func runAsService(a *agent.Agent) error {
	isService, err := svc.IsWindowsService()
	if err != nil {
		return err
	}
	if !isService {
		return errors.New("windows.runAsService is true but the service control manager did not start this process: register it with sc.exe create, or set runAsService to false")
	}
	h := &service{agent: a}
	if err := svc.Run(serviceName, h); err != nil {
		return err
	}
	return h.err
}

// service is the svc.Handler around one agent run.
type service struct {
	agent *agent.Agent
	err   error
}

// Execute implements svc.Handler.
func (s *service) Execute(_ []string, requests <-chan svc.ChangeRequest, status chan<- svc.Status) (bool, uint32) {
	status <- svc.Status{State: svc.StartPending}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.agent.Run(ctx) }()
	status <- svc.Status{State: svc.Running, Accepts: svc.AcceptStop | svc.AcceptShutdown}
	for {
		select {
		case err := <-done:
			s.err = err
			status <- svc.Status{State: svc.StopPending}
			if err != nil {
				return true, 1 // service-specific exit code 1: the agent failed
			}
			return false, 0
		case req := <-requests:
			switch req.Cmd {
			case svc.Interrogate:
				status <- req.CurrentStatus
			case svc.Stop, svc.Shutdown:
				status <- svc.Status{State: svc.StopPending}
				cancel()
				s.err = <-done
				return false, 0
			}
		}
	}
}
