// Package e2e holds multi-node tests of nodenet with real packets: node
// network namespaces on one underlay (test/netnode), a real kube-apiserver
// (test/apiserver), nodenet's overlay controller and Linux dataplane per
// node, pods wired by the real nodenet-cni binary, and real flanneld as a
// peer. The tests are Linux only and need root; this file exists so the
// package builds everywhere.
package e2e
