// Command kindcni is skewtest's stand-in for kindnetd in offline kind node
// images (kindnetd's source is not in the kind module). Run by the
// DaemonSet of /kind/manifests/default-cni.yaml on every node, with the
// host network and NET_ADMIN, it loops every few seconds:
//
//   - reads the Node objects (its ServiceAccount may list nodes);
//   - writes $CNI_CONF_DIR/10-skewtest.conflist, a bridge (cni0) +
//     host-local network for this node's podCIDRs, plus portmap;
//   - routes every other node's podCIDRs via that node's InternalIP (of the
//     same IP family), replacing existing routes, and removes the routes it
//     made for nodes that went away.
//
// Pod traffic is not masqueraded: pods, nodes and Services reach each
// other with pod IPs as sources, which is all the scenarios need; traffic
// from pods to addresses outside the cluster's nodes has no return route.
//
// It talks to the API server at $CONTROL_PLANE_ENDPOINT (host:port, which
// kind adds to the DaemonSet) or else the in-cluster Service address, with
// the ServiceAccount token and CA.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

const (
	saDir    = "/var/run/secrets/kubernetes.io/serviceaccount"
	confName = "10-skewtest.conflist"
	interval = 5 * time.Second
)

func main() {
	log.SetFlags(log.LstdFlags | log.Lmsgprefix)
	log.SetPrefix("kindcni: ")
	nodeName := os.Getenv("NODE_NAME")
	if nodeName == "" {
		log.Fatal("NODE_NAME is not set")
	}
	confDir := os.Getenv("CNI_CONF_DIR")
	if confDir == "" {
		confDir = "/etc/cni/net.d"
	}
	api, err := newAPIClient()
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	r := &reconciler{node: nodeName, confDir: confDir, routes: map[string]string{}}
	log.Printf("node %s, API server %s, CNI config %s", nodeName, api.base, filepath.Join(confDir, confName))
	for {
		nodes, err := api.nodes(ctx)
		if err != nil {
			log.Printf("list nodes: %v", err)
		} else if err := r.reconcile(nodes); err != nil {
			log.Print(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

// node is the part of a Node object kindcni reads.
type node struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		PodCIDR  string   `json:"podCIDR"`
		PodCIDRs []string `json:"podCIDRs"`
	} `json:"spec"`
	Status struct {
		Addresses []struct {
			Type    string `json:"type"`
			Address string `json:"address"`
		} `json:"addresses"`
	} `json:"status"`
}

func (n node) podCIDRs() []string {
	if len(n.Spec.PodCIDRs) > 0 {
		return n.Spec.PodCIDRs
	}
	if n.Spec.PodCIDR != "" {
		return []string{n.Spec.PodCIDR}
	}
	return nil
}

// internalIP returns the node's InternalIP of the family of cidr.
func (n node) internalIP(cidr *net.IPNet) net.IP {
	v4 := cidr.IP.To4() != nil
	for _, a := range n.Status.Addresses {
		if a.Type != "InternalIP" {
			continue
		}
		ip := net.ParseIP(a.Address)
		if ip != nil && (ip.To4() != nil) == v4 {
			return ip
		}
	}
	return nil
}

type reconciler struct {
	node    string
	confDir string
	// routes are the routes this process made: podCIDR -> gateway.
	routes map[string]string
	// replace and remove change the routing table; tests stub them.
	replace, remove func(dst *net.IPNet, gw net.IP) error
}

func (r *reconciler) reconcile(nodes []node) error {
	var self *node
	for i := range nodes {
		if nodes[i].Metadata.Name == r.node {
			self = &nodes[i]
		}
	}
	if self == nil {
		return fmt.Errorf("node %s not found", r.node)
	}
	cidrs := self.podCIDRs()
	if len(cidrs) == 0 {
		return fmt.Errorf("node %s has no podCIDR yet", r.node)
	}
	conf, err := conflist(cidrs)
	if err != nil {
		return err
	}
	if changed, err := writeIfChanged(filepath.Join(r.confDir, confName), conf); err != nil {
		return err
	} else if changed {
		log.Printf("wrote %s for podCIDRs %v", confName, cidrs)
	}
	want := desiredRoutes(r.node, nodes)
	replace, remove := r.replace, r.remove
	if replace == nil {
		replace = func(dst *net.IPNet, gw net.IP) error { return routeRequest(rtmNewRoute, dst, gw) }
	}
	if remove == nil {
		remove = func(dst *net.IPNet, gw net.IP) error { return routeRequest(rtmDelRoute, dst, gw) }
	}
	var errs []string
	for dst, gw := range want {
		_, ipnet, _ := net.ParseCIDR(dst)
		// Replace every time: cheap, and repairs a route someone removed.
		if err := replace(ipnet, net.ParseIP(gw)); err != nil {
			errs = append(errs, fmt.Sprintf("route %s via %s: %v", dst, gw, err))
			continue
		}
		if r.routes[dst] != gw {
			log.Printf("route %s via %s", dst, gw)
			r.routes[dst] = gw
		}
	}
	for dst, gw := range r.routes {
		if _, ok := want[dst]; ok {
			continue
		}
		_, ipnet, _ := net.ParseCIDR(dst)
		if err := remove(ipnet, net.ParseIP(gw)); err != nil {
			errs = append(errs, fmt.Sprintf("remove route %s via %s: %v", dst, gw, err))
			continue
		}
		log.Printf("removed route %s via %s", dst, gw)
		delete(r.routes, dst)
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// desiredRoutes maps every other node's podCIDRs to that node's
// InternalIP of the same family.
func desiredRoutes(self string, nodes []node) map[string]string {
	want := map[string]string{}
	for _, n := range nodes {
		if n.Metadata.Name == self {
			continue
		}
		for _, c := range n.podCIDRs() {
			_, ipnet, err := net.ParseCIDR(c)
			if err != nil {
				continue
			}
			if ip := n.internalIP(ipnet); ip != nil {
				want[ipnet.String()] = ip.String()
			}
		}
	}
	return want
}

// conflist is the CNI network for a node's podCIDRs: a bridge with the
// gateway on it, host-local addresses from the podCIDRs, default routes
// for each family, and portmap for hostPorts.
func conflist(podCIDRs []string) ([]byte, error) {
	var ranges [][]map[string]string
	var routes []map[string]string
	seen := map[string]bool{}
	for _, c := range podCIDRs {
		_, ipnet, err := net.ParseCIDR(c)
		if err != nil {
			return nil, fmt.Errorf("podCIDR %q: %w", c, err)
		}
		ranges = append(ranges, []map[string]string{{"subnet": ipnet.String()}})
		def := "0.0.0.0/0"
		if ipnet.IP.To4() == nil {
			def = "::/0"
		}
		if !seen[def] {
			seen[def] = true
			routes = append(routes, map[string]string{"dst": def})
		}
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "skewtest",
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      "cni0",
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":   "host-local",
					"ranges": ranges,
					"routes": routes,
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// writeIfChanged writes data to path atomically unless it already holds it.
func writeIfChanged(path string, data []byte) (bool, error) {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return false, err
	}
	return true, os.Rename(tmp, path)
}

// apiClient reads nodes from the API server with the pod's ServiceAccount.
type apiClient struct {
	base string
	http *http.Client
}

func newAPIClient() (*apiClient, error) {
	hostPort := os.Getenv("CONTROL_PLANE_ENDPOINT")
	if hostPort == "" {
		host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
		if host == "" || port == "" {
			return nil, fmt.Errorf("neither CONTROL_PLANE_ENDPOINT nor KUBERNETES_SERVICE_HOST/PORT is set")
		}
		hostPort = net.JoinHostPort(host, port)
	}
	ca, err := os.ReadFile(filepath.Join(saDir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("no certificates in %s/ca.crt", saDir)
	}
	return &apiClient{
		base: "https://" + hostPort,
		http: &http.Client{
			Timeout:   10 * time.Second,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
		},
	}, nil
}

func (c *apiClient) nodes(ctx context.Context) ([]node, error) {
	// Re-read the token each time: projected tokens are rotated.
	token, err := os.ReadFile(filepath.Join(saDir, "token"))
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/api/v1/nodes", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return nil, fmt.Errorf("GET /api/v1/nodes: %s: %s", resp.Status, strings.TrimSpace(b.String()))
	}
	var list struct {
		Items []node `json:"items"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, err
	}
	return list.Items, nil
}
