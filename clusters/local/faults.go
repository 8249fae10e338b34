package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"

	"k8s.io/client-go/tools/clientcmd"

	"sigs.k8s.io/skewtest/clusters/nodes"
)

// The fault knobs of a local node: the catalogue's faults kill the
// kubelet, cut it off from the API server and give it feature gates.
var (
	_ nodes.WithKubeletKill         = (*Node)(nil)
	_ nodes.WithAPIServerOutage     = (*Node)(nil)
	_ nodes.WithKubeletFeatureGates = (*Node)(nil)
)

// KillKubelet implements nodes.WithKubeletKill.
func (n *Node) KillKubelet(context.Context) error {
	n.mu.Lock()
	proc := n.proc
	n.proc = nil
	n.mu.Unlock()
	if proc != nil {
		if err := proc.Kill(); err != nil {
			return fmt.Errorf("kill kubelet on %s: %w", n.l.name, err)
		}
	}
	return n.endOutage()
}

// SetKubeletFeatureGates implements nodes.WithKubeletFeatureGates: the
// installed kubelet's configuration is written again with gates.
func (n *Node) SetKubeletFeatureGates(_ context.Context, gates map[string]bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil {
		return fmt.Errorf("set feature gates on %s: the kubelet is running; stop it first", n.l.name)
	}
	if n.bin.Path == "" {
		return fmt.Errorf("set feature gates on %s: no kubelet installed (SwapKubelet first)", n.l.name)
	}
	n.gates = gates
	return n.writeConfig()
}

// CutAPIServer implements nodes.WithAPIServerOutage. Every component of a
// local cluster reaches the API server at the same loopback address, so a
// packet filter cannot tell the kubelet's connections from the others'.
// Instead the kubelet's next start gets a kubeconfig of its own whose
// server is a TCP proxy in the harness: while cut, the proxy closes every
// connection it accepts; once restored, it forwards them. The API
// server's certificate names 127.0.0.1, so TLS is unchanged. The kubelet
// keeps the proxy until it next stops, which removes both.
func (n *Node) CutAPIServer(context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil {
		return fmt.Errorf("cut the API server from the kubelet on %s: the kubelet is running; stop it first", n.l.name)
	}
	if n.outage != nil {
		n.outage.setCut(true)
		return nil
	}
	kc, err := clientcmd.LoadFromFile(n.l.kubeconfig())
	if err != nil {
		return fmt.Errorf("cut the API server from the kubelet on %s: %w", n.l.name, err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("cut the API server from the kubelet on %s: %w", n.l.name, err)
	}
	for _, c := range kc.Clusters {
		c.Server = "https://" + lis.Addr().String()
	}
	path := n.l.kubeconfig() + ".outage"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		lis.Close()
		return fmt.Errorf("cut the API server from the kubelet on %s: %w", n.l.name, err)
	}
	n.outage = &apiProxy{lis: lis, upstream: fmt.Sprintf("127.0.0.1:%d", n.p.ports.apiserver), kubeconfig: path, cut: true, conns: map[net.Conn]bool{}}
	go n.outage.serve()
	return nil
}

// RestoreAPIServer implements nodes.WithAPIServerOutage.
func (n *Node) RestoreAPIServer(context.Context) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.outage == nil {
		return 0, fmt.Errorf("restore the API server for the kubelet on %s: it was not cut", n.l.name)
	}
	return n.outage.setCut(false), nil
}

// kubeletKubeconfig is the kubeconfig the kubelet starts with: through the
// outage proxy while there is one. n.mu held.
func (n *Node) kubeletKubeconfig() string {
	if n.outage != nil {
		return n.outage.kubeconfig
	}
	return n.l.kubeconfig()
}

// endOutage removes the outage proxy and its kubeconfig, once the kubelet
// that used them is gone.
func (n *Node) endOutage() error {
	n.mu.Lock()
	o := n.outage
	n.outage = nil
	n.mu.Unlock()
	if o == nil {
		return nil
	}
	o.close()
	if err := os.Remove(o.kubeconfig); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// apiProxy forwards TCP connections to the API server, or closes them
// while cut.
type apiProxy struct {
	lis        net.Listener
	upstream   string
	kubeconfig string

	mu      sync.Mutex
	cut     bool
	refused int
	conns   map[net.Conn]bool
}

// setCut cuts or restores, and returns how many connections were refused
// so far.
func (a *apiProxy) setCut(cut bool) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cut = cut
	return a.refused
}

func (a *apiProxy) serve() {
	for {
		c, err := a.lis.Accept()
		if err != nil {
			return
		}
		a.mu.Lock()
		cut := a.cut
		if cut {
			a.refused++
		} else {
			a.conns[c] = true
		}
		a.mu.Unlock()
		if cut {
			c.Close()
			continue
		}
		go a.forward(c)
	}
}

func (a *apiProxy) forward(c net.Conn) {
	defer func() {
		a.mu.Lock()
		delete(a.conns, c)
		a.mu.Unlock()
		c.Close()
	}()
	up, err := net.Dial("tcp", a.upstream)
	if err != nil {
		return
	}
	a.mu.Lock()
	a.conns[up] = true
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.conns, up)
		a.mu.Unlock()
		up.Close()
	}()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

// close stops accepting and ends every forwarded connection.
func (a *apiProxy) close() {
	a.lis.Close()
	a.mu.Lock()
	defer a.mu.Unlock()
	for c := range a.conns {
		c.Close()
	}
}
