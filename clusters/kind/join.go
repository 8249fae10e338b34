package kind

import (
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"sigs.k8s.io/skewtest/clusters/internal/pki"
)

// The workers join by a discovery file instead of kind's discovery by
// bootstrap token alone. By token, kubeadm join trusts the cluster-info
// ConfigMap only once the controller manager has signed it for the token,
// and it looks again every 5 s: on 2 cores the controller manager signs a
// few seconds after kubeadm init returns, so every join waited 5 or 10 s
// for it. A discovery file is trusted as it is: it names the API server
// and holds the cluster's CA, which the run makes before the cluster and
// kubeadm init then uses (kubeadm keeps a CA it finds in
// /etc/kubernetes/pki). The token is the run's own; the workers use it
// for their TLS bootstrap only.

// The paths the join files are mounted at in the nodes.
const (
	caCertInNode    = "/etc/kubernetes/pki/ca.crt"
	caKeyInNode     = "/etc/kubernetes/pki/ca.key"
	discoveryInNode = "/kind/skewtest-discovery.conf"
)

// apiServerPort is the port kind's control plane serves the API on inside
// the cluster's network (kind's common.APIServerInternalPort).
const apiServerPort = 6443

// join is what the workers join the cluster by: the CA given to the
// control plane, the discovery file given to the workers, and the
// bootstrap token kubeadm init creates for them.
type join struct {
	caCert, caKey, discovery string
	token                    string
}

// writeJoin makes the cluster's CA and the workers' discovery file in dir,
// and a bootstrap token, for cluster.
func writeJoin(dir, cluster string) (join, error) {
	ca, err := pki.NewCA(dir, "kubernetes")
	if err != nil {
		return join{}, fmt.Errorf("kind provider: the cluster's CA: %w", err)
	}
	caPEM, err := os.ReadFile(ca.CertFile)
	if err != nil {
		return join{}, err
	}
	token, err := bootstrapToken()
	if err != nil {
		return join{}, err
	}
	j := join{caCert: ca.CertFile, caKey: ca.KeyFile, discovery: filepath.Join(dir, "discovery.conf"), token: token}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[""] = &clientcmdapi.Cluster{Server: apiServerURL(cluster), CertificateAuthorityData: caPEM}
	if err := clientcmd.WriteToFile(*cfg, j.discovery); err != nil {
		return join{}, fmt.Errorf("kind provider: the workers' discovery file: %w", err)
	}
	return j, nil
}

// apiServerURL is the API server as the nodes reach it: kind's control
// plane node by its name on the cluster's network, as kind's own
// discovery names it (controlPlaneEndpoint).
func apiServerURL(cluster string) string {
	return "https://" + net.JoinHostPort(cluster+"-control-plane", strconv.Itoa(apiServerPort))
}

// bootstrapToken is a new kubeadm bootstrap token, [a-z0-9]{6}.[a-z0-9]{16}.
func bootstrapToken() (string, error) {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	// Bytes from 252 up are dropped, so that each character is as likely.
	const limit = 256 / len(alphabet) * len(alphabet)
	var out []byte
	buf := make([]byte, 32)
	for len(out) < 22 {
		if _, err := rand.Read(buf); err != nil {
			return "", err
		}
		for _, c := range buf {
			if int(c) < limit && len(out) < 22 {
				out = append(out, alphabet[int(c)%len(alphabet)])
			}
		}
	}
	return string(out[:6]) + "." + string(out[6:]), nil
}
