// Command nodenet-cni is the CNI plugin container runtimes exec for every
// pod on a nodenet node. It is deliberately thin: it forwards each request
// (ADD, DEL, CHECK, GC, STATUS) over a unix socket to the nodenet agent,
// which does the work, and prints the agent's answer. VERSION is answered
// locally.
package main

import "github.com/nodenet/nodenet/cni/plugin"

func main() {
	plugin.PluginMain()
}
