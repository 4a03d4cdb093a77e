//go:build !linux

package main

import "github.com/nodenet/nodenet/config"

// cleanupSupported: only Linux nodes have a cleanup yet.
const cleanupSupported = false

// inspectDataplane is Linux's; runCleanup stops before it elsewhere.
func inspectDataplane(*config.AgentConfiguration, *cleanupPlan) error { return nil }
