//go:build !windows

package main

import (
	"errors"

	"github.com/nodenet/nodenet/agent"
)

// serviceSupported: only Windows has a service control manager; elsewhere
// windows.runAsService is ignored (the simulator runs Windows configs).
const serviceSupported = false

func runAsService(*agent.Agent) error {
	return errors.New("no service control manager on this OS")
}
