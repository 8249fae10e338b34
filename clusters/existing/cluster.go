package existing

// This file is how a run knows its cluster again: the kubeconfig context
// it used, that context's API server and the sha256 of its CA bundle, so
// that `skewtest clean`, run later with the same kubeconfig, acts on that
// cluster or not at all.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"

	"k8s.io/client-go/tools/clientcmd"
)

// apiIdentity names one cluster as a kubeconfig reaches it. No secret:
// the CA bundle is public, and only its digest is kept.
type apiIdentity struct {
	// Context is the kubeconfig context's name.
	Context string `json:"context"`
	// Server is the context's API server URL.
	Server string `json:"server"`
	// CASHA256 is the hex sha256 of the context's CA bundle; empty when
	// the kubeconfig gives none (the system's roots).
	CASHA256 string `json:"caSHA256,omitempty"`
}

// Same tells whether c and o are one cluster: one API server behind one
// CA. The context's name does not count: two contexts may reach one
// cluster.
func (c apiIdentity) Same(o apiIdentity) bool {
	return c.Server == o.Server && c.CASHA256 == o.CASHA256
}

func (c apiIdentity) String() string {
	ca := "no CA bundle"
	if c.CASHA256 != "" {
		ca = "CA sha256 " + c.CASHA256
	}
	return fmt.Sprintf("context %q: API server %s, %s", c.Context, c.Server, ca)
}

// clusterIdentity is the cluster kubeconfig reaches through context, or
// through its current context when context is empty.
func clusterIdentity(kubeconfig, context string) (apiIdentity, error) {
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: context},
	)
	raw, err := cc.RawConfig()
	if err != nil {
		return apiIdentity{}, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	rc, err := cc.ClientConfig()
	if err != nil {
		return apiIdentity{}, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	id := apiIdentity{Context: raw.CurrentContext, Server: rc.Host}
	if context != "" {
		id.Context = context
	}
	ca := rc.CAData
	if len(ca) == 0 && rc.CAFile != "" {
		if ca, err = os.ReadFile(rc.CAFile); err != nil {
			return apiIdentity{}, fmt.Errorf("kubeconfig %s: the CA bundle of context %q: %w", kubeconfig, id.Context, err)
		}
	}
	if len(ca) > 0 {
		sum := sha256.Sum256(ca)
		id.CASHA256 = hex.EncodeToString(sum[:])
	}
	return id, nil
}
