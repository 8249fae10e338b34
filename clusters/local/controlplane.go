package local

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/klient/wait"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/local/internal/process"
)

// startDaemon starts one component, logging to logs/<name>.log, hands it
// to keep (so Down stops it even if it never gets ready), and waits for
// ready.
func (p *Provider) startDaemon(ctx context.Context, name string, argv []string, timeout time.Duration, ready func(context.Context) error, keep func(*process.Process)) error {
	proc, err := process.StartIn(p.daemonCgroup, name, p.path("logs", name+".log"), p.path("pids", name+".pid"), argv, nil)
	if err != nil {
		return err
	}
	keep(proc)
	if ready == nil {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, p.timeout(timeout))
	defer cancel()
	if err := proc.WaitReady(wctx, 100*time.Millisecond, ready); err != nil {
		return fmt.Errorf("local provider: start %s: %w", name, err)
	}
	return nil
}

// The run's etcd certificates (writePKI): etcd's own, for serving and for
// its peer port, and the API server's as its client.
const (
	etcdServerCert = "etcd-server"
	etcdClientCert = "apiserver-etcd-client"
)

func (p *Provider) startControlPlane(ctx context.Context, bins map[string]binaries.Binary) error {
	pk := func(f string) string { return p.path("pki", f) }
	etcdURL := fmt.Sprintf("https://127.0.0.1:%d", p.ports.etcdClient)
	peerURL := fmt.Sprintf("https://127.0.0.1:%d", p.ports.etcdPeer)
	probe, err := etcdProbeClient(pk("ca.crt"), pk(etcdClientCert+".crt"), pk(etcdClientCert+".key"))
	if err != nil {
		return err
	}
	err = p.startDaemon(ctx, "etcd", []string{"/usr/bin/etcd",
		"--name=skewtest", "--data-dir=" + p.path("etcd"),
		"--listen-client-urls=" + etcdURL, "--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=skewtest=" + peerURL, "--initial-cluster-state=new",
		"--cert-file=" + pk(etcdServerCert+".crt"), "--key-file=" + pk(etcdServerCert+".key"),
		"--client-cert-auth=true", "--trusted-ca-file=" + pk("ca.crt"),
		"--peer-cert-file=" + pk(etcdServerCert+".crt"), "--peer-key-file=" + pk(etcdServerCert+".key"),
		"--peer-client-cert-auth=true", "--peer-trusted-ca-file=" + pk("ca.crt"),
		"--logger=zap", "--log-outputs=stderr",
	}, 30*time.Second, httpOK(etcdURL+"/health", probe, p.timeout(probeTimeout)), p.keep)
	if err != nil {
		return err
	}
	err = p.startDaemon(ctx, "kube-apiserver", []string{bins["kube-apiserver"].Path,
		"--etcd-servers=" + etcdURL,
		"--etcd-cafile=" + pk("ca.crt"), "--etcd-certfile=" + pk(etcdClientCert+".crt"), "--etcd-keyfile=" + pk(etcdClientCert+".key"),
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", p.ports.apiserver),
		"--advertise-address=" + p.nodeIP.String(),
		"--endpoint-reconciler-type=none",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--client-ca-file=" + pk("ca.crt"),
		"--tls-cert-file=" + pk("apiserver.crt"), "--tls-private-key-file=" + pk("apiserver.key"),
		"--kubelet-client-certificate=" + pk("apiserver-kubelet-client.crt"), "--kubelet-client-key=" + pk("apiserver-kubelet-client.key"),
		// Without this the node proxy (kubelet logs, metrics) dials the
		// node name, which does not resolve.
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pk("sa.pub"), "--service-account-signing-key-file=" + pk("sa.key"),
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--profiling=false",
	}, 90*time.Second, p.apiserverReady, p.keep)
	if err != nil {
		return err
	}
	if err := p.startDaemon(ctx, "kube-controller-manager", []string{bins["kube-controller-manager"].Path,
		"--kubeconfig=" + p.path("kubeconfig", "controller-manager.kubeconfig"),
		"--authentication-kubeconfig=" + p.path("kubeconfig", "controller-manager.kubeconfig"),
		"--authorization-kubeconfig=" + p.path("kubeconfig", "controller-manager.kubeconfig"),
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", p.ports.controllerManager),
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + pk("sa.key"),
		"--root-ca-file=" + pk("ca.crt"),
		"--cluster-signing-cert-file=" + pk("ca.crt"), "--cluster-signing-key-file=" + pk("ca.key"),
		"--allocate-node-cidrs=false",
	}, 60*time.Second, httpOK(fmt.Sprintf("https://127.0.0.1:%d/healthz", p.ports.controllerManager), insecureClient, p.timeout(probeTimeout)), p.keep); err != nil {
		return err
	}
	return p.startDaemon(ctx, "kube-scheduler", []string{bins["kube-scheduler"].Path,
		"--kubeconfig=" + p.path("kubeconfig", "scheduler.kubeconfig"),
		"--authentication-kubeconfig=" + p.path("kubeconfig", "scheduler.kubeconfig"),
		"--authorization-kubeconfig=" + p.path("kubeconfig", "scheduler.kubeconfig"),
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", p.ports.scheduler),
		"--leader-elect=false",
	}, 60*time.Second, httpOK(fmt.Sprintf("https://127.0.0.1:%d/healthz", p.ports.scheduler), insecureClient, p.timeout(probeTimeout)), p.keep)
}

// keep records a control plane daemon; Down stops them in reverse order.
func (p *Provider) keep(proc *process.Process) {
	p.mu.Lock()
	p.procs = append(p.procs, proc)
	p.mu.Unlock()
}

func (p *Provider) apiserverReady(ctx context.Context) error {
	cs, err := p.client()
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, p.timeout(probeTimeout))
	defer cancel()
	_, err = cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(rctx)
	return err
}

// etcdProbeClient reads etcd's /health as the API server reaches etcd:
// over TLS, verifying etcd against the run's CA, with the API server's
// client certificate.
func etcdProbeClient(caFile, certFile, keyFile string) (*http.Client, error) {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("local provider: no CA certificate in %s", caFile)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("local provider: etcd client certificate: %w", err)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}}, nil
}

// insecureClient reads the self-signed /healthz endpoints of the
// controller manager and scheduler; only readiness is learnt from them.
var insecureClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

// probeTimeout bounds one readiness probe (a /healthz, /readyz or
// /health request), before the provider's timeout factor: under TCG an
// API server's /readyz took 2.5-4.5 s, and a 2 s probe never saw it
// ready.
const probeTimeout = 2 * time.Second

// httpOK probes url with client (nil: the default client), each request
// bounded by timeout.
func httpOK(url string, client *http.Client, timeout time.Duration) func(context.Context) error {
	if client == nil {
		client = http.DefaultClient
	}
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	}
}

// waitControllers returns once the controller manager's controllers run,
// seen by the default ServiceAccount of namespace default, which one of
// them makes. Its /healthz answers seconds before: it builds its
// controllers one after another (5 s on 2 cores during a bring-up), and a
// StatefulSet made in between waited that long for its first pod.
func (p *Provider) waitControllers(ctx context.Context) error {
	cs, err := p.client()
	if err != nil {
		return err
	}
	err = wait.For(func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}, wait.WithContext(ctx), wait.WithTimeout(p.timeout(controllersTimeout)), wait.WithInterval(100*time.Millisecond), wait.WithImmediate())
	if err != nil {
		return fmt.Errorf("local provider: the controller manager's controllers did not start (no ServiceAccount default/default) within %s: %w; log: %s", p.timeout(controllersTimeout), err, p.path("logs", "kube-controller-manager.log"))
	}
	return nil
}

// controllersTimeout bounds waitControllers, before the timeout factor.
const controllersTimeout = 2 * time.Minute
