// Package clusters is the facade over skewtest's cluster providers: local
// (a real control plane and kubelets on this Linux host), kind (kind
// clusters as a library), existing (a kubeconfig plus SSH to the nodes)
// and kops (AWS). Each provider package exports one registry.Descriptor;
// this package lists them (new.go) and makes, checks and cleans up after
// providers through them, so that nothing else names a provider: scenarios
// and suites see Provider, nodes.Node, the descriptors' properties and
// clusters/capabilities.
package clusters

import "sigs.k8s.io/skewtest/clusters/registry"

// Provider is one cluster's lifecycle (registry.Provider, after kubetest2's
// deployer and kind's cluster.Provider).
type Provider = registry.Provider

// Descriptor is a provider as package clusters lists it
// (registry.Descriptor).
type Descriptor = registry.Descriptor

// Options are what every provider shares (registry.Options); each
// provider's own settings are the value its Descriptor.FromEnv reads.
type Options = registry.Options

// Setting is one environment variable a provider reads.
type Setting = registry.Setting

// RunDir is what `skewtest clean` knows of a directory before it cleans
// it (Inspect).
type RunDir = registry.RunDir
