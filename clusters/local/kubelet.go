package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/template"
	"time"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/internal/cgroups"
	"sigs.k8s.io/skewtest/clusters/local/internal/process"
	"sigs.k8s.io/skewtest/clusters/nodes"
)

// Node is one node of a local cluster: this host, seen through a kubelet
// run as a child process with a containerd, a CNI network, a cgroup root
// and a CSI node plugin of its own.
type Node struct {
	exec.Local
	p       *Provider
	l       nodeLayout
	st      nodeState
	ports   nodePorts
	initial binaries.Binary // the kubelet Up starts

	mu         sync.Mutex
	containerd *process.Process
	driver     *process.Process // the CSI driver's node service
	bin        binaries.Binary  // installed kubelet
	run        int              // kubelet runs so far, for log names
	// proc is the running kubelet, nil when stopped.
	proc *process.Process
	log  string
	// gates are feature gates the harness put into the kubelet's
	// configuration (SetKubeletFeatureGates).
	gates map[string]bool
	// outage, while set, stands between the kubelet and the API server
	// (CutAPIServer).
	outage *apiProxy
	// notes are facts the harness should report ("removed checkpoint ...").
	notes []string
}

// nodePorts are the ports a node's kubelet listens on: the API server
// reaches each kubelet at the node IP and the port its node status
// advertises.
type nodePorts struct{ kubelet, kubeletHealthz int }

var (
	_ nodes.Node           = (*Node)(nil)
	_ nodes.WithNotes      = (*Node)(nil)
	_ nodes.WithKubeletLog = (*Node)(nil)
)

func (p *Provider) newNode(i int, st nodeState, ports nodePorts, initial binaries.Binary) (*Node, error) {
	l := layoutOf(p.dir, i)
	for _, d := range []string{l.kubeletRoot(), l.kubeletConfigDir(), l.podLogs(), l.flexvolume()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	return &Node{p: p, l: l, st: st, ports: ports, initial: initial}, nil
}

// String is the node name.
func (n *Node) String() string { return n.l.name }

// KubeletRootDir implements nodes.Node.
func (n *Node) KubeletRootDir() string { return n.l.kubeletRoot() }

// LogFile is the current (or last) kubelet run's log.
func (n *Node) LogFile() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.log
}

// KubeletLog implements nodes.WithKubeletLog: each kubelet run logs to a
// file of its own (LogFile), so the current one holds exactly the last
// start's lines.
func (n *Node) KubeletLog(context.Context) (string, error) {
	path := n.LogFile()
	if path == "" {
		return "", fmt.Errorf("kubelet log of %s: the kubelet has not been started", n.l.name)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("kubelet log of %s: %w", n.l.name, err)
	}
	return string(b), nil
}

// Notes returns and clears what the node did that a report should say.
func (n *Node) Notes() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.notes
	n.notes = nil
	return out
}

// StopKubelet implements nodes.Node: SIGTERM, then SIGKILL after 30 s.
func (n *Node) StopKubelet(context.Context) error {
	n.mu.Lock()
	proc := n.proc
	n.proc = nil
	n.mu.Unlock()
	if proc != nil {
		if err := proc.Stop(30 * time.Second); err != nil {
			return fmt.Errorf("stop kubelet on %s: %w", n.l.name, err)
		}
	}
	return n.endOutage()
}

// SwapKubelet implements nodes.Node: the next start runs bin with a
// configuration written for its version.
func (n *Node) SwapKubelet(_ context.Context, bin binaries.Binary) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil {
		return fmt.Errorf("swap kubelet on %s: the kubelet is running; stop it first", n.l.name)
	}
	if _, err := version.ParseSemantic(bin.Version); err != nil {
		return fmt.Errorf("swap kubelet on %s: version %q of %s: %w", n.l.name, bin.Version, bin.Path, err)
	}
	if _, err := os.Stat(bin.Path); err != nil {
		return fmt.Errorf("swap kubelet on %s: %w", n.l.name, err)
	}
	n.bin = bin
	if err := n.writeConfig(); err != nil {
		return fmt.Errorf("swap kubelet on %s: %w", n.l.name, err)
	}
	return nil
}

// writeConfig writes the installed kubelet's configuration. n.mu held.
func (n *Node) writeConfig() error {
	v, err := version.ParseSemantic(n.bin.Version)
	if err != nil {
		return fmt.Errorf("version %q of %s: %w", n.bin.Version, n.bin.Path, err)
	}
	if err := os.WriteFile(n.configFile(v), []byte(n.kubeletConfig(v)), 0o644); err != nil {
		return fmt.Errorf("write kubelet config: %w", err)
	}
	if writesHostPodLogs(v) {
		n.notes = append(n.notes, fmt.Sprintf("kubelet %s has no podLogsDir (%s+): it writes its pods' logs to %s, from which teardown removes the run's", n.bin.Version, podLogsDirSince, hostPodLogDir))
	}
	return nil
}

func (n *Node) configFile(v *version.Version) string {
	return filepath.Join(n.l.kubeletConfigDir(), fmt.Sprintf("kubelet-v%s.yaml", v))
}

// StartKubelet implements nodes.Node. It returns once the kubelet answers
// /healthz. An older kubelet may refuse checkpoint files a newer one wrote
// ("checkpoint is corrupted"): then the checkpoint files are removed, the
// start is retried once, and a note says so.
func (n *Node) StartKubelet(ctx context.Context) error {
	err := n.startOnce(ctx)
	if err == nil {
		return nil
	}
	var ce *checkpointError
	if !errors.As(err, &ce) {
		return err
	}
	var removed []string
	for _, f := range nodes.KubeletCheckpoints {
		path := filepath.Join(n.KubeletRootDir(), f)
		if os.Remove(path) == nil {
			removed = append(removed, f)
		}
	}
	n.mu.Lock()
	n.notes = append(n.notes, fmt.Sprintf("kubelet %s refused a checkpoint written by another version (%s); removed %s and started again", n.bin.Version, ce.line, strings.Join(removed, ", ")))
	n.mu.Unlock()
	return n.startOnce(ctx)
}

// hostKubeletRoot is the kubelet's default --root-dir. Every kubelet,
// whatever its --root-dir, keeps its device manager there
// (hostDevicePluginDir), in its own mount namespace (mountns.go).
const hostKubeletRoot = "/var/lib/kubelet"

// deviceManagerSocket is where a kubelet the host runs itself serves
// device plugin registration: checkHostKubelet looks for it.
const deviceManagerSocket = hostDevicePluginDir + "/kubelet.sock"

type checkpointError struct{ line string }

func (e *checkpointError) Error() string { return "kubelet refused a checkpoint: " + e.line }

func (n *Node) startOnce(ctx context.Context) error {
	n.mu.Lock()
	if n.proc != nil {
		n.mu.Unlock()
		return fmt.Errorf("start kubelet on %s: already running", n.l.name)
	}
	if n.bin.Path == "" {
		n.mu.Unlock()
		return fmt.Errorf("start kubelet on %s: no kubelet installed (SwapKubelet first)", n.l.name)
	}
	n.run++
	v, _ := version.ParseSemantic(n.bin.Version)
	logFile := n.l.kubeletLog(n.run, n.bin.Version)
	argv := append([]string{n.bin.Path, "--config=" + n.configFile(v)}, n.kubeletFlags(v)...)
	argv = n.l.inOwnMountNamespace(n.p.devicePluginHolder, argv)
	proc, err := process.StartIn(n.p.daemonCgroup, n.l.kubeletName(), logFile, n.l.kubeletPIDFile(), argv, nil)
	if err != nil {
		n.mu.Unlock()
		return fmt.Errorf("start kubelet on %s: %w", n.l.name, err)
	}
	n.proc, n.log = proc, logFile
	n.mu.Unlock()

	wctx, cancel := context.WithTimeout(ctx, n.p.timeout(60*time.Second))
	defer cancel()
	healthy := httpOK(fmt.Sprintf("http://127.0.0.1:%d/healthz", n.ports.kubeletHealthz), nil, n.p.timeout(probeTimeout))
	err = proc.WaitReady(wctx, 50*time.Millisecond, healthy)
	if err == nil {
		return nil
	}
	n.mu.Lock()
	n.proc = nil
	n.mu.Unlock()
	_ = proc.Stop(5 * time.Second)
	logTail := process.TailFile(logFile, 40)
	if line, ok := nodes.FindRefusedCheckpoint(logTail); ok {
		return &checkpointError{line: line}
	}
	if gate, line, ok := nodes.FindRejectedFeatureGate(logTail); ok {
		return &nodes.RejectedFeatureGateError{Node: n.l.name, Version: n.bin.Version, Gate: gate, Line: line}
	}
	return fmt.Errorf("start kubelet %s on %s: the kubelet did not become healthy: %w\n(if it rejected a flag, config field or feature gate, that version does not know it; log: %s)", n.bin.Version, n.l.name, err, logFile)
}

// kubeletFlags are the kubelet's flags besides --config for version v:
// flags every version from 1.26 takes, and for a kubelet before 1.27,
// which has no containerRuntimeEndpoint field and would otherwise dial the
// host's own /run/containerd/containerd.sock, the run's containerd as a
// flag.
func (n *Node) kubeletFlags(v *version.Version) []string {
	flags := []string{
		"--kubeconfig=" + n.kubeletKubeconfig(),
		"--root-dir=" + n.KubeletRootDir(),
		"--cert-dir=" + n.l.kubeletCertDir(),
		"--hostname-override=" + n.l.name,
		"--node-ip=" + n.p.nodeIP.String(),
		"--v=2",
	}
	if v != nil && v.LessThan(runtimeEndpointFieldSince) {
		flags = append(flags, "--container-runtime-endpoint=unix://"+n.l.containerdSocket())
	}
	return flags
}

// runtimeEndpointFieldSince is the first kubelet minor whose configuration
// has containerRuntimeEndpoint (1.27); before it the endpoint is a flag.
var runtimeEndpointFieldSince = version.MajorMinor(1, 27)

// kubeletConfig is the KubeletConfiguration for version v. A field a
// version does not know (containerRuntimeEndpoint before 1.27, podLogsDir
// before 1.30, failCgroupV1 before 1.31) is only a warning: every kubelet
// from 1.26 falls back to lenient decoding of v1beta1 and ignores it, and
// kubeletFlags and hostPodLogDir make up for the two that matter. An
// unknown feature gate or a removed flag is fatal, so gates are only the
// plan entry's own (checked against plan/gates.go).
func (n *Node) kubeletConfig(v *version.Version) string {
	var b strings.Builder
	_ = kubeletConfigTmpl.Execute(&b, map[string]any{
		"CA":          n.p.path("pki", "ca.crt"),
		"CgroupRoot":  n.st.CgroupRoot,
		"Runtime":     "unix://" + n.l.containerdSocket(),
		"PodLogs":     n.l.podLogs(),
		"Flex":        n.l.flexvolume(),
		"Address":     n.p.nodeIP.String(),
		"Port":        n.ports.kubelet,
		"HealthzPort": n.ports.kubeletHealthz,
		// cgroup v1 hosts: kubelets from 1.35 refuse to start unless told.
		"FailCgroupV1": n.p.host.Mode == cgroups.Unified,
		"CgroupDriver": cgroupDriver,
		"Version":      v.String(),
		"FeatureGates": n.gates,
		// The kubelet's node status and lease requests time out after
		// this interval too: under TCG 2 s requests timed out (TLS
		// handshakes alone took longer) and the node went NotReady.
		"NodeStatusUpdateFrequency": n.p.timeout(nodeStatusUpdateFrequency).String(),
	})
	return b.String()
}

var kubeletConfigTmpl = template.Must(template.New("kubelet").Parse(`# skewtest: KubeletConfiguration for kubelet v{{.Version}}
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: {{.CA}}
authorization:
  mode: Webhook
address: {{.Address}}
port: {{.Port}}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {{.HealthzPort}}
cgroupDriver: {{.CgroupDriver}}
cgroupRoot: {{.CgroupRoot}}
failCgroupV1: {{.FailCgroupV1}}
containerRuntimeEndpoint: {{.Runtime}}
podLogsDir: {{.PodLogs}}
volumePluginDir: {{.Flex}}
failSwapOn: false
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
syncFrequency: 10s
nodeStatusUpdateFrequency: {{.NodeStatusUpdateFrequency}}
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%"
  nodefs.inodesFree: "1%"
  imagefs.available: "1%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
{{- if .FeatureGates}}
featureGates:
{{- range $gate, $on := .FeatureGates}}
  {{$gate}}: {{$on}}
{{- end}}
{{- end}}
`))

// nodeStatusUpdateFrequency is how often the kubelet posts its node's
// status, before the timeout factor: often, so the harness sees a hop's
// new kubelet version soon.
const nodeStatusUpdateFrequency = 2 * time.Second

// cgroupDriver is the kubelets' cgroup driver, and containerd's runc's
// (SystemdCgroup = false): they must match, and the kubelet asks
// containerd which one it uses. cgroupfs on every host, systemd or not:
// the pods' cgroups live in the run's own cgroup (see cgroups.go), where
// the kubelet makes them itself and systemd, which handed that subtree
// over, does not look.
const cgroupDriver = "cgroupfs"
