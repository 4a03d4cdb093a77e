// Package config is nodenet's one configuration: the AgentConfiguration
// type (apiVersion nodenet.io/v1alpha1), its defaults, its validation, the
// import of kube-proxy and flannel configs, and writing it back out.
//
// The node network, the CNI server and the service proxy all take their
// facts (network name and mode, source VIP, CIDRs, DSR, feature gates) from
// one AgentConfiguration, so they cannot drift apart as flannel and
// kube-proxy configs do.
//
// # Contract
//
//   - Load (and LoadFile) accepts an AgentConfiguration, a kube-proxy
//     KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1) or a flannel
//     net-conf.json, detected from the content, and returns a defaulted
//     AgentConfiguration. Decoding is strict: unknown or misspelled fields
//     are errors naming them.
//   - Validation reports every problem at once, each as a
//     k8s.io/apimachinery field.Error with its path (network.vxlan.vni);
//     warnings (ignored, dropped or inferred settings) are separate.
//     Problems with a decodable config come back as an *InvalidError next to
//     the config: the package only reports, and the agent decides, by
//     ConfigHardFail, whether to exit (true, the default) or log and go on.
//   - Defaults and rules depend on the target OS given in the options, not
//     on runtime.GOOS, so any machine can check a Windows node's config.
//   - Node-local facts that are only known at runtime (the node's pod CIDRs)
//     are checked by ValidateForNode.
//   - The stored fields keep what the operator wrote; the Effective* methods
//     give what a node actually runs (an overlay network is IPv4 only).
//   - Marshal and WriteFile write the current apiVersion; loading what they
//     wrote gives an equal config.
//
// The package has no global state; everything it reads from the
// environment (NODE_NAME, the hostname) can be injected through options.
package config
