// Package kopsnode makes the guest of make test-hosts a real node of a real
// cluster, laid out as kops lays out its nodes, for the existing provider
// to test from the host over SSH.
//
// It runs inside the guest (skewtest vm kops-node). The local provider
// (clusters/local) brings up its cluster there as on any host: etcd and
// the control plane, the node's containerd, skewtest's CSI driver and the
// node's kubelet, Ready. Then the node's kubelet is handed to systemd
// (local.Node.HandOffKubelet), as kops' nodeup installs it
// (kops's nodeup/pkg/model/kubelet.go):
//
//   - the binary at /usr/local/bin/kubelet;
//   - its flags in /etc/sysconfig/kubelet (DAEMON_ARGS), read through
//     EnvironmentFile;
//   - its config at /var/lib/kubelet/kubelet.conf;
//   - /lib/systemd/system/kubelet.service with Restart=always,
//     RestartSec=2s, KillMode=process.
//
// The kubelet keeps the local provider's --root-dir, under the run
// directory: the CSI driver registered there. What an existing cluster
// offers a test, it gets too: a StorageClass of its own (no provisioner,
// WaitForFirstConsumer) with PVs of skewtest's CSI driver made in advance
// on the node, a busybox image in the node's containerd (there is no
// registry), and the API server reachable from outside the guest (a
// forwarder on the guest's network address; qemu forwards a host port to
// it, and the API server's certificate covers 127.0.0.1).
//
// Config.Nodes adds nodes beside the first on the same guest (layoutOf),
// so that two runs can share one cluster at once, each on its node.
//
// Serve keeps all of it until its context ends, then stops and removes the
// units and their files and tears the cluster down.
package kopsnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec" // systemctl in the guest itself, where this program runs
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/conditions"
	skexec "sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/internal/csidriver"
	"sigs.k8s.io/skewtest/clusters/internal/statefile"
	"sigs.k8s.io/skewtest/clusters/local"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/clusters/timeouts"
)

// The node's layout, as kops makes it.
const (
	Unit            = "kubelet"
	UnitFile        = "/lib/systemd/system/kubelet.service"
	Binary          = "/usr/local/bin/kubelet"
	EnvironmentFile = "/etc/sysconfig/kubelet"
	ConfigFile      = "/var/lib/kubelet/kubelet.conf"
	// healthzPort is the kubelet's default, which the existing provider
	// polls (systemdkubelet.DefaultHealthzURL).
	healthzPort = 10248
)

// NodeLayout is where one node's kubelet is laid out on the guest, and
// how the existing provider reaches it (KUBELET_UNIT, KUBELET_BINARY,
// KUBELET_ROOT_DIR, KUBELET_HEALTHZ_URL).
type NodeLayout struct {
	Node          string `json:"node"`
	KubeletUnit   string `json:"kubeletUnit"`
	KubeletBinary string `json:"kubeletBinary"`
	// KubeletUnitFile, KubeletEnvironmentFile and KubeletConfigFile are
	// the rest of the layout: what Serve removes again.
	KubeletUnitFile        string `json:"kubeletUnitFile"`
	KubeletEnvironmentFile string `json:"kubeletEnvironmentFile"`
	KubeletConfigFile      string `json:"kubeletConfigFile"`
	KubeletRootDir         string `json:"kubeletRootDir"`
	KubeletHealthzURL      string `json:"kubeletHealthzURL"`
	// KubeletWrapper, on a further node, is what its unit runs: a script
	// that runs KubeletBinary in the node's own mount namespace
	// (local.KubeletHandoff.Namespace). The first node's kubelet, the
	// host's only one in the host's namespace, needs none.
	KubeletWrapper string `json:"kubeletWrapper,omitempty"`
}

// layoutOf is node i's layout: the first node's is kops's own; a host
// has one kubelet there, so each further node (a second kubelet on the
// same guest, for two runs at once on one shared cluster) takes the same
// paths with a suffix, -2, -3, ...
func layoutOf(i int) NodeLayout {
	sfx := ""
	if i > 0 {
		sfx = fmt.Sprintf("-%d", i+1)
	}
	l := NodeLayout{
		KubeletUnit:            Unit + sfx,
		KubeletUnitFile:        strings.TrimSuffix(UnitFile, ".service") + sfx + ".service",
		KubeletBinary:          Binary + sfx,
		KubeletEnvironmentFile: EnvironmentFile + sfx,
		KubeletConfigFile:      strings.TrimSuffix(ConfigFile, ".conf") + sfx + ".conf",
	}
	if i > 0 {
		l.KubeletWrapper = l.KubeletBinary + "-ns"
	}
	return l
}

// files are the files of the layout: Serve refuses a guest that has any
// of them and removes them all at its end.
func (l NodeLayout) files() []string {
	out := []string{l.KubeletUnitFile, l.KubeletBinary, l.KubeletEnvironmentFile, l.KubeletConfigFile}
	if l.KubeletWrapper != "" {
		out = append(out, l.KubeletWrapper)
	}
	return out
}

// execStart is the program the unit runs with $DAEMON_ARGS.
func (l NodeLayout) execStart() string {
	if l.KubeletWrapper != "" {
		return l.KubeletWrapper
	}
	return l.KubeletBinary
}

// wrapperText is KubeletWrapper's script: namespace (the handoff's) with
// the kubelet and the unit's arguments appended.
func (l NodeLayout) wrapperText(namespace []string) string {
	var q []string
	for _, a := range append(slices.Clone(namespace), l.KubeletBinary) {
		q = append(q, skexec.ShellQuote(a))
	}
	return "#!/bin/sh\n# " + l.KubeletUnit + " runs its kubelet in a mount namespace of its own (skewtest make test-hosts)\nexec " + strings.Join(q, " ") + ` "$@"` + "\n"
}

// What the cluster offers a test of the node.
const (
	// StorageClass gives volumes on the node: PVs made in advance, bound
	// when a pod is scheduled.
	StorageClass = "skewtest-node-local"
	// Image is the workload image in the node's containerd.
	Image = "localhost/skewtest/busybox:v1"
	// DefaultAPIServerPort is the guest port the API server is forwarded
	// from when Config.APIServerPort is 0.
	DefaultAPIServerPort = 6443
	// InfoFile, in Config.Out, describes the node for the test (Info).
	InfoFile = "node.json"
	// KubeconfigFile, in Config.Out, is the admin kubeconfig, with its
	// credentials inline and the server Config.Server.
	KubeconfigFile = "kubeconfig"
)

// ReadyLine starts the line `skewtest vm kops-node` prints once the node
// can be tested; the node's Info follows as JSON.
const ReadyLine = "kops-node ready: "

// pvSize is each PV's capacity: at least what a scenario asks for.
const pvSize = "64Mi"

// unitText is the kubelet's unit as kops writes it, but for ExecStart's
// $DAEMON_ARGS, unquoted here so that systemd splits it into arguments;
// the layout's environment file and binary replace kops's.
func (l NodeLayout) unitText() string {
	return strings.NewReplacer(EnvironmentFile, l.KubeletEnvironmentFile, Binary+" ", l.execStart()+" ").Replace(kopsUnitText)
}

// kopsUnitText is the first node's unit.
const kopsUnitText = `[Unit]
Description=Kubernetes Kubelet Server (laid out as kops lays out a node; skewtest make test-hosts)
Documentation=https://github.com/kubernetes/kubernetes
After=containerd.service

[Service]
EnvironmentFile=` + EnvironmentFile + `
ExecStart=` + Binary + ` $DAEMON_ARGS
Restart=always
RestartSec=2s
StartLimitInterval=0
KillMode=process
User=root
CPUAccounting=true
MemoryAccounting=true

[Install]
WantedBy=multi-user.target
`

// Config configures Serve.
type Config struct {
	// RunID names the local provider's run.
	RunID    string
	RunRoot  string
	CacheDir string
	// Kubelet is the node's own kubelet; the control plane runs
	// APIServerVersion.
	Kubelet          binaries.Binary
	APIServerVersion string
	// Busybox is a static busybox (Debian's busybox-static), the workload
	// image's only program.
	Busybox string
	// PVs is how many volumes StorageClass has on each node.
	PVs int
	// Nodes is how many nodes the cluster has, each a kubelet of its own
	// under systemd (layoutOf); 0 means 1.
	Nodes int
	// Out receives KubeconfigFile and InfoFile.
	Out string
	// Server is the API server's URL as the test reaches it (the host's
	// end of the forward).
	Server string
	// APIServerPort is the guest port forward listens on for Server;
	// DefaultAPIServerPort if 0.
	APIServerPort int
	Logger        *slog.Logger
}

// Info is what InfoFile holds: the settings of an existing-provider run
// against the node.
type Info struct {
	// NodeLayout is the first node's, laid out as kops lays out a node.
	NodeLayout
	// More are the further nodes' (Config.Nodes).
	More           []NodeLayout `json:"moreNodes,omitempty"`
	KubeletVersion string       `json:"kubeletVersion"`
	StorageClass   string       `json:"storageClass"`
	Image          string       `json:"image"`
	// PVs is how many volumes StorageClass has on each node.
	PVs int `json:"pvs"`
	// GuestKubeconfig is the admin kubeconfig as reached from inside the
	// guest (the local provider's own), for what runs beside the node.
	GuestKubeconfig string `json:"guestKubeconfig"`
}

// handoff is what Serve needs of the local provider's node.
type handoff interface {
	nodes.Node
	HandOffKubelet(ctx context.Context, healthzPort int) (local.KubeletHandoff, error)
	ContainerdSocket() string
}

var _ handoff = (*local.Node)(nil)

// Serve brings the node up, calls ready once the test can use it, and
// keeps it until ctx ends; then it removes everything it made. Its error
// joins the bring-up's, or the teardown's.
func Serve(ctx context.Context, cfg Config, ready func(Info)) (err error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	nodeCount := max(cfg.Nodes, 1)
	var layouts []NodeLayout
	for i := range nodeCount {
		layouts = append(layouts, layoutOf(i))
	}
	if err := checkFree(layouts); err != nil {
		return err
	}
	apiV, err := version.ParseSemantic(cfg.APIServerVersion)
	if err != nil {
		return fmt.Errorf("kopsnode: API server version %q: %w", cfg.APIServerVersion, err)
	}
	if _, err := os.Stat(cfg.Busybox); err != nil {
		return fmt.Errorf("kopsnode: busybox: %w (apt-get install busybox-static)", err)
	}
	factor, err := timeouts.Parse(os.Getenv(timeouts.FactorEnv))
	if err != nil {
		return fmt.Errorf("kopsnode: %w", err)
	}
	kubelets := make([]binaries.Binary, nodeCount)
	for i := range kubelets {
		kubelets[i] = cfg.Kubelet
	}
	p, err := local.New(local.Config{RunID: cfg.RunID, RunRoot: cfg.RunRoot, CacheDir: cfg.CacheDir,
		APIServerVersion: apiV, Kubelets: kubelets, TimeoutFactor: factor, Logger: log})
	if err != nil {
		return err
	}
	// Teardown runs whatever happened, on a context of its own: ctx's end
	// is what starts it.
	defer func() {
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeouts.Scale(5*time.Minute, factor))
		defer cancel()
		err = errors.Join(err, removeUnits(tctx, layouts, log), p.Down(tctx))
	}()
	start := time.Now()
	if err := p.Up(ctx); err != nil {
		return err
	}
	ns, err := p.TestNodes(ctx)
	if err != nil {
		return err
	}
	if len(ns) != nodeCount {
		return fmt.Errorf("kopsnode: the local provider made %d nodes, want %d", len(ns), nodeCount)
	}
	rc, err := p.RESTConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	res, err := resources.New(rc)
	if err != nil {
		return err
	}
	if err := makeStorageClass(ctx, cs); err != nil {
		return err
	}
	for i, nn := range ns {
		n, ok := nn.(handoff)
		if !ok {
			return fmt.Errorf("kopsnode: the local provider's node %s cannot hand its kubelet off", nn)
		}
		if err := importBusybox(ctx, p.Binaries(), n.ContainerdSocket(), cfg.Busybox, filepath.Join(p.RunDir(), fmt.Sprintf("busybox-%d", i))); err != nil {
			return err
		}
		if err := makeVolumes(ctx, cs, n.String(), cfg.RunID, cfg.PVs); err != nil {
			return err
		}
		// The first node's kubelet answers where a kops node's does; a
		// further one keeps the port the provider gave it.
		port := 0
		if i == 0 {
			port = healthzPort
		}
		h, err := n.HandOffKubelet(ctx, port)
		if err != nil {
			return err
		}
		l := &layouts[i]
		l.Node, l.KubeletRootDir = n.String(), n.KubeletRootDir()
		l.KubeletHealthzURL = fmt.Sprintf("http://127.0.0.1:%d/healthz", h.HealthzPort)
		if err := installUnit(ctx, h, *l); err != nil {
			return err
		}
		if err := conditions.WaitNodeReady(ctx, res, n.String(), cfg.Kubelet.Version, timeouts.Scale(2*time.Minute, factor)); err != nil {
			return fmt.Errorf("kopsnode: the kubelet under systemd: %w (journalctl -u %s)", err, l.KubeletUnit)
		}
	}
	log.Info("kopsnode: the nodes' kubelets run under systemd as kops lays them out", "nodes", len(layouts), "units", layouts, "took", time.Since(start).Round(time.Second))
	port := cfg.APIServerPort
	if port == 0 {
		port = DefaultAPIServerPort
	}
	stopForward, err := forward(ctx, port, rc.Host, log)
	if err != nil {
		return err
	}
	defer stopForward()
	if err := writeKubeconfig(p.KubeconfigPath(), cfg.Server, filepath.Join(cfg.Out, KubeconfigFile)); err != nil {
		return err
	}
	info := Info{NodeLayout: layouts[0], More: layouts[1:], KubeletVersion: cfg.Kubelet.Version,
		StorageClass: StorageClass, Image: Image, PVs: cfg.PVs, GuestKubeconfig: p.KubeconfigPath()}
	// In one rename: a test polling for InfoFile reads all of it or none.
	if err := statefile.Write(cfg.Out, InfoFile, info, 0o644); err != nil {
		return err
	}
	ready(info)
	<-ctx.Done()
	log.Info("kopsnode: tearing the node down", "cause", context.Cause(ctx))
	return nil
}

// checkFree refuses a guest where the layouts' files already exist: they
// are not Serve's to replace or remove.
func checkFree(layouts []NodeLayout) error {
	var files []string
	for _, l := range layouts {
		files = append(files, l.files()...)
	}
	for _, f := range files {
		if _, err := os.Stat(f); err == nil {
			return fmt.Errorf("kopsnode: %s exists: this host already has a kubelet laid out as kops does; use a fresh guest", f)
		}
	}
	return nil
}

// installUnit lays the kubelet out as l says and starts its unit.
func installUnit(ctx context.Context, h local.KubeletHandoff, l NodeLayout) error {
	bin, err := os.ReadFile(h.Binary)
	if err != nil {
		return err
	}
	files := []struct {
		path string
		mode os.FileMode
		data []byte
	}{
		{l.KubeletBinary, 0o755, bin},
		{l.KubeletConfigFile, 0o644, []byte(h.Config)},
		{l.KubeletEnvironmentFile, 0o644, []byte(`DAEMON_ARGS="--config=` + l.KubeletConfigFile + " " + strings.Join(h.Flags, " ") + "\"\n")},
		{l.KubeletUnitFile, 0o644, []byte(l.unitText())},
	}
	if l.KubeletWrapper != "" {
		files = append(files, struct {
			path string
			mode os.FileMode
			data []byte
		}{l.KubeletWrapper, 0o755, []byte(l.wrapperText(h.Namespace))})
	}
	for _, f := range files {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(f.path, f.data, f.mode); err != nil {
			return fmt.Errorf("kopsnode: %w", err)
		}
	}
	for _, argv := range [][]string{{"systemctl", "daemon-reload"}, {"systemctl", "enable", "--now", l.KubeletUnit}} {
		if out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("kopsnode: %s: %w: %s", strings.Join(argv, " "), err, out)
		}
	}
	return nil
}

// removeUnits stops and disables each layout's unit and removes its
// files, with whatever a killed swap left beside the binary; the local
// provider's teardown then removes the rest. A unit that was never made
// is nothing to do.
func removeUnits(ctx context.Context, layouts []NodeLayout, log *slog.Logger) error {
	var errs []error
	removed := false
	for _, l := range layouts {
		if _, err := os.Stat(l.KubeletUnitFile); errors.Is(err, os.ErrNotExist) {
			continue
		}
		removed = true
		if out, err := exec.CommandContext(ctx, "systemctl", "disable", "--now", l.KubeletUnit).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("kopsnode: systemctl disable --now %s: %w: %s", l.KubeletUnit, err, out))
		}
		olds, _ := filepath.Glob(l.KubeletBinary + ".skewtest-*")
		for _, f := range append(l.files(), olds...) {
			if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	if !removed {
		return errors.Join(errs...)
	}
	// Made for the layout; empty now unless something else uses them.
	for _, d := range []string{filepath.Dir(EnvironmentFile), filepath.Dir(ConfigFile)} {
		_ = os.Remove(d)
	}
	if out, err := exec.CommandContext(ctx, "systemctl", "daemon-reload").CombinedOutput(); err != nil {
		errs = append(errs, fmt.Errorf("kopsnode: systemctl daemon-reload: %w: %s", err, out))
	}
	for _, l := range layouts {
		_ = exec.CommandContext(ctx, "systemctl", "reset-failed", l.KubeletUnit).Run()
	}
	log.Info("kopsnode: kubelet units and their files removed", "units", len(layouts))
	return errors.Join(errs...)
}

// makeStorageClass makes StorageClass: no provisioner, volumes bound when
// a pod is scheduled.
func makeStorageClass(ctx context.Context, cs kubernetes.Interface) error {
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: StorageClass},
		Provisioner:       "kubernetes.io/no-provisioner",
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimRetain),
	}
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("kopsnode: create StorageClass %s: %w", StorageClass, err)
	}
	return nil
}

// makeVolumes makes n PVs of StorageClass, skewtest's CSI driver's, on
// node, unbound: as an administrator makes local volumes, bound by the
// scheduler to whatever claims a pod on the node.
func makeVolumes(ctx context.Context, cs kubernetes.Interface, node, runID string, n int) error {
	qty := resource.MustParse(pvSize)
	for i := range n {
		name := fmt.Sprintf("%s-%s-%s-%d", StorageClass, runID, node, i)
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: qty},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              StorageClass,
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
					Driver: csidriver.Name, VolumeHandle: "vol-" + name,
					VolumeAttributes: map[string]string{csidriver.VolumeContextCapacity: pvSize, csidriver.VolumeContextMode: string(csidriver.ModeTmpfs)},
				}},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
				}}}},
			},
		}
		if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("kopsnode: create PV %s: %w", name, err)
		}
	}
	return nil
}

// writeKubeconfig writes the admin kubeconfig at from to to, with its
// files inline and its server replaced by server.
func writeKubeconfig(from, server, to string) error {
	kc, err := clientcmd.LoadFromFile(from)
	if err != nil {
		return err
	}
	if err := clientcmdapi.FlattenConfig(kc); err != nil {
		return err
	}
	for _, c := range kc.Clusters {
		c.Server = server
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*kc, to)
}

// forward accepts on port of every address but loopback's and
// relays each connection to the API server at apiURL: the API server
// listens on the guest's loopback only, which qemu's forward cannot reach.
// TLS passes through; the host sees the API server's own certificate.
func forward(ctx context.Context, port int, apiURL string, log *slog.Logger) (stop func(), err error) {
	u, err := url.Parse(apiURL)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
	if err != nil {
		return nil, fmt.Errorf("kopsnode: listen for the API server's forward: %w", err)
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				select {
				case <-done:
				default:
					log.Error("kopsnode: API server forward", "err", err)
				}
				return
			}
			go relay(ctx, c, u.Host)
		}
	})
	return func() {
		close(done)
		l.Close()
		wg.Wait()
	}, nil
}

func relay(ctx context.Context, c net.Conn, target string) {
	defer c.Close()
	var d net.Dialer
	t, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		return
	}
	defer t.Close()
	go func() {
		_, _ = io.Copy(t, c)
		t.(*net.TCPConn).CloseWrite()
	}()
	_, _ = io.Copy(c, t)
}
