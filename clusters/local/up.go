package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/conditions"
	"sigs.k8s.io/skewtest/clusters/internal/images"
	"sigs.k8s.io/skewtest/clusters/local/internal/pki"
)

// Host programs taken from Debian packages, with the package that has each,
// for the error a user sees when one is missing.
var hostPrograms = []struct{ path, pkg string }{
	{"/usr/bin/etcd", "etcd-server"},
	{"/usr/sbin/runc", "runc"},
	{"/usr/lib/cni/bridge", "containernetworking-plugins"},
	{"/usr/lib/cni/host-local", "containernetworking-plugins"},
	{"/usr/lib/cni/loopback", "containernetworking-plugins"},
}

type ports struct {
	etcdClient, etcdPeer, apiserver, kubelet, kubeletHealthz, controllerManager, scheduler int
}

// Up implements clusters.Provider: builds or reuses the binaries, then
// starts etcd, the control plane, containerd, skewtest's CSI node plugin and
// the kubelet, and returns when the node is Ready. On failure it tears down
// whatever it started.
func (p *Provider) Up(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			if derr := p.Down(context.WithoutCancel(ctx)); derr != nil {
				err = errors.Join(err, fmt.Errorf("teardown after failed bring-up: %w", derr))
			}
		}
	}()
	if err := checkHostPrograms(); err != nil {
		return err
	}
	bins, err := p.ensureBinaries(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return fmt.Errorf("create run directory: %w", err)
	}
	p.logger.Info("bringing up a local cluster", "dir", p.dir, "apiserver", "v"+p.cfg.APIServerVersion.String(), "kubelet", p.cfg.Kubelet.Version)
	if p.nodeIP, err = nodeIP(); err != nil {
		return err
	}
	if err := p.allocatePorts(); err != nil {
		return err
	}
	_, statErr := os.Stat("/run/containerd")
	short := shortID(p.cfg.RunID)
	st := state{
		CgroupRoot:              "/skewtest-" + short,
		Bridge:                  "skw" + short,
		CNINetwork:              "skewtest-" + short,
		IPTablesBefore:          iptablesChains(ctx),
		IPTablesRecorded:        true,
		ContainerdRunDirExisted: statErr == nil,
	}
	if err := writeState(p.dir, st); err != nil {
		return err
	}
	if err := makeCgroupRoot(st.CgroupRoot); err != nil {
		return err
	}
	if err := p.writePKI(); err != nil {
		return err
	}
	if err := p.startControlPlane(ctx, bins); err != nil {
		return err
	}
	p.logger.Info("control plane ready", "elapsed", time.Since(start).Round(100*time.Millisecond))
	if err := p.startContainerd(ctx, bins, st); err != nil {
		return err
	}
	imgDir := p.path("images")
	tarball, err := images.Build(ctx, imgDir)
	if err != nil {
		return err
	}
	if err := p.importImages(ctx, bins, tarball); err != nil {
		return err
	}
	p.logger.Info("containerd ready, images imported", "elapsed", time.Since(start).Round(100*time.Millisecond))
	if err := p.startCSIDriver(ctx); err != nil {
		return err
	}
	node, err := p.newNode(st)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.node = node
	p.mu.Unlock()
	if err := node.SwapKubelet(ctx, p.cfg.Kubelet); err != nil {
		return err
	}
	if err := node.StartKubelet(ctx); err != nil {
		return err
	}
	res, err := p.resources()
	if err != nil {
		return err
	}
	if err := conditions.WaitNodeReady(ctx, res, NodeName, p.cfg.Kubelet.Version, 2*time.Minute); err != nil {
		return fmt.Errorf("local provider: %w; kubelet log: %s", err, node.LogFile())
	}
	if err := p.createCSIDriverObject(ctx); err != nil {
		return err
	}
	p.logger.Info("local cluster up", "node", NodeName, "took", time.Since(start).Round(100*time.Millisecond), "kubeconfig", p.KubeconfigPath())
	return nil
}

func checkHostPrograms() error {
	var missing []string
	for _, hp := range hostPrograms {
		if _, err := os.Stat(hp.path); err != nil {
			missing = append(missing, fmt.Sprintf("%s (apt-get install %s)", hp.path, hp.pkg))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("local provider: missing host programs: %v; scripts/install-deps.sh installs them", missing)
	}
	for _, tool := range []string{"iptables", "ip", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("local provider: %s not found on PATH; scripts/install-deps.sh installs it", tool)
		}
	}
	return nil
}

// ensureBinaries builds (or finds in the cache) the control plane at the
// API server's version and containerd.
func (p *Provider) ensureBinaries(ctx context.Context) (map[string]binaries.Binary, error) {
	b := &binaries.ModuleBuilder{CacheDir: p.cfg.CacheDir, Logger: p.logger}
	cp, err := b.Build(ctx, p.cfg.APIServerVersion, "kube-apiserver", "kube-controller-manager", "kube-scheduler")
	if err != nil {
		return nil, err
	}
	cd, err := b.BuildTool(ctx, binaries.Containerd)
	if err != nil {
		return nil, err
	}
	all := map[string]binaries.Binary{}
	var list []binaries.Binary
	for _, m := range []map[string]binaries.Binary{cp, cd} {
		for k, v := range m {
			all[k] = v
		}
	}
	for _, name := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "containerd", "containerd-shim-runc-v2", "ctr"} {
		list = append(list, all[name])
	}
	for _, hp := range []struct{ name, path, pkg string }{{"etcd", "/usr/bin/etcd", "etcd-server"}, {"runc", "/usr/sbin/runc", "runc"}} {
		sum, err := binaries.FileSHA256(hp.path)
		if err != nil {
			return nil, err
		}
		list = append(list, binaries.Binary{Component: hp.name, Version: debianVersion(ctx, hp.pkg), Source: "debian:" + hp.pkg, Path: hp.path, SHA256: sum})
	}
	p.mu.Lock()
	p.binaries = list
	p.mu.Unlock()
	return all, nil
}

func debianVersion(ctx context.Context, pkg string) string {
	out, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${Version}", pkg).Output()
	if err != nil {
		return "unknown"
	}
	return string(out)
}

func (p *Provider) allocatePorts() error {
	var got []int
	for range 7 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("allocate a port: %w", err)
		}
		defer l.Close()
		got = append(got, l.Addr().(*net.TCPAddr).Port)
	}
	p.ports = ports{etcdClient: got[0], etcdPeer: got[1], apiserver: got[2], kubelet: got[3], kubeletHealthz: got[4], controllerManager: got[5], scheduler: got[6]}
	return nil
}

// nodeIP is the host's first non-loopback IPv4 address: the kubelet rejects
// a loopback node IP, and the API server reaches the kubelet through it.
func nodeIP() (net.IP, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
				return ipn.IP.To4(), nil
			}
		}
	}
	return nil, fmt.Errorf("local provider: no non-loopback IPv4 address on this host; the kubelet needs one as its node IP")
}

func shortID(runID string) string {
	if len(runID) >= 4 {
		return runID[len(runID)-4:]
	}
	return runID
}

func (p *Provider) writePKI() error {
	dir := p.path("pki")
	ca, err := pki.NewCA(dir, "skewtest-ca")
	if err != nil {
		return err
	}
	reqs := []pki.Request{
		{Name: "apiserver", CommonName: "kube-apiserver", Server: true,
			DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
			IPs:      []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 96, 0, 1), p.nodeIP}},
		{Name: "apiserver-kubelet-client", CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}, Client: true},
		{Name: "admin", CommonName: "skewtest-admin", Organization: []string{"system:masters"}, Client: true},
		{Name: "controller-manager", CommonName: "system:kube-controller-manager", Client: true},
		{Name: "scheduler", CommonName: "system:kube-scheduler", Client: true},
		{Name: "kubelet", CommonName: "system:node:" + NodeName, Organization: []string{"system:nodes"}, Client: true},
	}
	pairs := map[string]pki.Pair{}
	for _, r := range reqs {
		pair, err := ca.Issue(dir, r)
		if err != nil {
			return err
		}
		pairs[r.Name] = pair
	}
	if _, _, err := pki.NewServiceAccountKey(dir); err != nil {
		return err
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", p.ports.apiserver)
	for _, name := range []string{"admin", "controller-manager", "scheduler", "kubelet"} {
		kc := clientcmdapi.NewConfig()
		kc.Clusters["skewtest"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: ca.CertFile}
		kc.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificate: pairs[name].CertFile, ClientKey: pairs[name].KeyFile}
		kc.Contexts["skewtest"] = &clientcmdapi.Context{Cluster: "skewtest", AuthInfo: name}
		kc.CurrentContext = "skewtest"
		if err := os.MkdirAll(p.path("kubeconfig"), 0o755); err != nil {
			return err
		}
		if err := clientcmd.WriteToFile(*kc, p.path("kubeconfig", name+".kubeconfig")); err != nil {
			return err
		}
	}
	return nil
}
