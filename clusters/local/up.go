package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec" // this host's tools and dpkg-query, checked before the cluster exists
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/conditions"
	"sigs.k8s.io/skewtest/clusters/internal/cgroups"
	"sigs.k8s.io/skewtest/clusters/internal/csidriver"
	"sigs.k8s.io/skewtest/clusters/internal/hostports"
	"sigs.k8s.io/skewtest/clusters/internal/images"
	"sigs.k8s.io/skewtest/clusters/internal/iptables"
	"sigs.k8s.io/skewtest/clusters/internal/sysctl"
	"sigs.k8s.io/skewtest/clusters/local/internal/pki"
	"sigs.k8s.io/skewtest/clusters/timeouts"
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

// ports are the control plane's; each node has its own nodePorts.
type ports struct {
	etcdClient, etcdPeer, apiserver, controllerManager, scheduler int
}

// Up implements clusters.Provider: builds or reuses the binaries, then
// starts etcd and the control plane and, for every node, containerd,
// skewtest's CSI driver (node service) and the kubelet (in the CSI
// driver's EBS mode also its controller service and the
// external-attacher), and returns when every node
// is Ready at its kubelet's version. On failure it tears down whatever it
// started.
//
// What does not depend on each other starts at once: the control plane,
// the image build and each node's containerd and image import; then every
// node's plugin and kubelet.
func (p *Provider) Up(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			// Bounded, as Finish's teardown is: nothing waits forever.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeouts.Scale(timeouts.Teardown, p.slow))
			defer cancel()
			if derr := p.Down(dctx); derr != nil {
				err = errors.Join(err, fmt.Errorf("teardown after failed bring-up: %w", derr))
			}
		}
	}()
	if err := checkHostPrograms(); err != nil {
		return err
	}
	if err := checkHostKubelet(deviceManagerSocket, p.cfg.RunRoot); err != nil {
		return err
	}
	host, err := cgroups.Detect()
	if err != nil {
		return fmt.Errorf("local provider: %w", err)
	}
	if err := checkCgroups(host); err != nil {
		return err
	}
	p.host = host
	if p.csiMode == csidriver.ModeEBS {
		if err := checkEBSPrograms(); err != nil {
			return err
		}
	}
	bins, err := p.ensureBinaries(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return fmt.Errorf("create run directory: %w", err)
	}
	names := NodeNames(len(p.cfg.Kubelets))
	var versions []string
	for _, k := range p.cfg.Kubelets {
		versions = append(versions, k.Version)
	}
	p.logger.Info("bringing up a local cluster", "dir", p.dir, "apiserver", "v"+p.cfg.APIServerVersion.String(),
		"nodes", strings.Join(names, ","), "kubelets", strings.Join(versions, ","))
	if p.nodeIP, err = nodeIP(); err != nil {
		return err
	}
	nodePorts, err := p.allocatePorts(len(names))
	if err != nil {
		return err
	}
	_, statErr := os.Stat("/run/containerd")
	_, kubeletDirErr := os.Stat(hostKubeletRoot)
	_, devicePluginDirErr := os.Stat(hostDevicePluginDir)
	_, cniDirErr := os.Stat(hostCNIDir)
	_, logDirErr := os.Stat(hostContainerLogDir)
	_, podLogDirErr := os.Stat(hostPodLogDir)
	st := state{
		IPTablesBefore:          iptables.ChainSets(ctx),
		IPTablesRecorded:        true,
		ContainerdRunDirExisted: statErr == nil,
		BootID:                  bootID(),
		HostKubeletDirMade:      errors.Is(kubeletDirErr, os.ErrNotExist),
		DevicePluginDirMade:     errors.Is(devicePluginDirErr, os.ErrNotExist),
		Sysctls:                 sysctl.Read(sysctl.Keys),
		CNIDirMade:              errors.Is(cniDirErr, os.ErrNotExist),
		ContainerLogDirMade:     errors.Is(logDirErr, os.ErrNotExist),
		PodLogsRecorded:         true,
		PodLogsBefore:           podLogEntries(hostPodLogDir),
		PodLogDirMade:           errors.Is(podLogDirErr, os.ErrNotExist),
	}
	for i := range names {
		st.Nodes = append(st.Nodes, layoutOf(p.dir, i).state(p.cfg.RunID))
	}
	st.Cgroup = planCgroups(host, p.cfg.RunID, st.Nodes)
	if err := writeState(p.dir, st); err != nil {
		return err
	}
	for i, ns := range st.Nodes {
		node, err := p.newNode(i, ns, nodePorts[i], p.cfg.Kubelets[i])
		if err != nil {
			return err
		}
		p.mu.Lock()
		p.nodes = append(p.nodes, node)
		p.mu.Unlock()
	}
	if p.devicePluginHolder, err = p.prepareKubeletNamespaces(); err != nil {
		return err
	}
	if note, err := ensureInotifyInstances(len(names)); err != nil {
		return err
	} else if note != "" {
		p.logger.Info(note)
	}
	if p.daemonCgroup, err = p.makeCgroups(ctx, st); err != nil {
		return err
	}
	cg := []any{"mode", host.Mode.String(), "init", host.Init.String()}
	if st.Cgroup != nil {
		cg = append(cg, "run cgroup", st.Cgroup.Path, "scope", st.Cgroup.Unit)
	}
	p.logger.Info("cgroups made", cg...)
	if err := p.writePKI(); err != nil {
		return err
	}

	// Each node's image import waits for the one image build, which starts
	// at once with the control plane and the containerds.
	imagesTarball := sync.OnceValues(func() (string, error) { return images.Build(ctx, p.path("images")) })
	err = p.parallel(ctx, func(ctx context.Context, n *Node) error {
		if err := n.startContainerd(ctx, bins); err != nil {
			return err
		}
		tarball, err := imagesTarball()
		if err != nil {
			return err
		}
		if err := n.importImages(ctx, bins, tarball); err != nil {
			return err
		}
		p.logger.Info("containerd ready, images imported", "node", n.String(), "elapsed", time.Since(start).Round(100*time.Millisecond))
		return nil
	}, func(ctx context.Context) error {
		if err := p.startControlPlane(ctx, bins); err != nil {
			return err
		}
		p.logger.Info("control plane ready", "elapsed", time.Since(start).Round(100*time.Millisecond))
		return nil
	}, func(context.Context) error {
		_, err := imagesTarball()
		return err
	}, p.writeCSIDriver)
	if err != nil {
		return err
	}
	res, err := p.resources()
	if err != nil {
		return err
	}
	shared := []func(context.Context) error{p.waitControllers}
	if p.csiMode == csidriver.ModeEBS {
		shared = append(shared, func(ctx context.Context) error { return p.startCSIController(ctx, bins[csiAttacherBinary]) })
	}
	err = p.parallel(ctx, func(ctx context.Context, n *Node) error {
		if err := n.StartCSIDriver(ctx); err != nil {
			return err
		}
		if err := n.SwapKubelet(ctx, n.initial); err != nil {
			return err
		}
		if err := n.StartKubelet(ctx); err != nil {
			return err
		}
		if err := conditions.WaitNodeReady(ctx, res, n.String(), n.initial.Version, p.timeout(2*time.Minute)); err != nil {
			return fmt.Errorf("local provider: %w; kubelet log: %s", err, n.LogFile())
		}
		p.logger.Info("node ready", "node", n.String(), "kubelet", n.initial.Version, "elapsed", time.Since(start).Round(100*time.Millisecond))
		return nil
	}, shared...)
	if err != nil {
		return err
	}
	if err := p.createCSIDriverObject(ctx); err != nil {
		return err
	}
	if p.csiMode == csidriver.ModeEBS {
		// Evidence for the report, until Down.
		wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		p.mu.Lock()
		p.stopRecording = cancel
		p.mu.Unlock()
		if err := p.recordVolumeAttachments(wctx); err != nil {
			return err
		}
	}
	p.logger.Info("local cluster up", "nodes", strings.Join(names, ","), "took", time.Since(start).Round(100*time.Millisecond), "kubeconfig", p.KubeconfigPath())
	return nil
}

// parallel runs perNode for every node and each of shared, all at once,
// and returns their errors joined. The first error cancels the context the
// others run with, so a failed bring-up does not wait out their timeouts.
func (p *Provider) parallel(ctx context.Context, perNode func(context.Context, *Node) error, shared ...func(context.Context) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	p.mu.Lock()
	nodes := append([]*Node(nil), p.nodes...)
	p.mu.Unlock()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	run := func(f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				cancel(err)
			}
		}()
	}
	for _, f := range shared {
		run(func() error { return f(ctx) })
	}
	for _, n := range nodes {
		run(func() error { return perNode(ctx, n) })
	}
	wg.Wait()
	return errors.Join(errs...)
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
	for _, tool := range []string{"iptables", "ip", "mount", unshareProgram} {
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
	tools := []map[string]binaries.Binary{cp, cd}
	names := []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "containerd", "containerd-shim-runc-v2", "ctr"}
	if p.csiMode == csidriver.ModeEBS {
		att, err := b.BuildTool(ctx, binaries.ExternalAttacher)
		if err != nil {
			return nil, err
		}
		tools = append(tools, att)
		names = append(names, csiAttacherBinary)
	}
	all := map[string]binaries.Binary{}
	var list []binaries.Binary
	for _, m := range tools {
		for k, v := range m {
			all[k] = v
		}
	}
	for _, name := range names {
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

// allocatePorts picks free ports for the control plane and for each of n
// nodes' kubelets, outside the kernel's ephemeral range (hostports): a
// kubelet whose healthz port an outbound connection took in the meantime
// never becomes healthy.
func (p *Provider) allocatePorts(n int) ([]nodePorts, error) {
	got, err := hostports.Free(5 + 2*n)
	if err != nil {
		return nil, fmt.Errorf("local provider: %w", err)
	}
	p.ports = ports{etcdClient: got[0], etcdPeer: got[1], apiserver: got[2], controllerManager: got[3], scheduler: got[4]}
	out := make([]nodePorts, n)
	for i := range out {
		out[i] = nodePorts{kubelet: got[5+2*i], kubeletHealthz: got[6+2*i]}
	}
	return out, nil
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
		// etcd speaks TLS on loopback and asks every client (and its one
		// peer, itself) for a certificate of this CA: on plain HTTP any
		// local user could write a role binding into it and have the
		// run's root kubelet start a privileged pod.
		{Name: etcdServerCert, CommonName: "skewtest-etcd", Server: true, Client: true,
			DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}},
		{Name: etcdClientCert, CommonName: "kube-apiserver-etcd-client", Client: true},
		{Name: "admin", CommonName: "skewtest-admin", Organization: []string{"system:masters"}, Client: true},
		{Name: "controller-manager", CommonName: "system:kube-controller-manager", Client: true},
		{Name: "scheduler", CommonName: "system:kube-scheduler", Client: true},
	}
	kubeconfigs := []string{"admin", "controller-manager", "scheduler"}
	for _, n := range p.nodes {
		// NodeRestriction lets each kubelet change only its own node.
		reqs = append(reqs, pki.Request{Name: n.l.kubeconfigName(), CommonName: "system:node:" + n.String(), Organization: []string{"system:nodes"}, Client: true})
		kubeconfigs = append(kubeconfigs, n.l.kubeconfigName())
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
	for _, name := range kubeconfigs {
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

// Prefetch implements capabilities.WithPrefetch: the control plane,
// containerd (and the attacher in EBS mode), built or found in the cache.
func (p *Provider) Prefetch(ctx context.Context) error {
	_, err := p.ensureBinaries(ctx)
	return err
}
