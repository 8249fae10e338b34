package hosts

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/scenarios/plan"
)

const (
	// kopsBudget bounds the kops-style node's bring-up in the guest: the
	// local provider's cluster, then the kubelet under systemd, Ready.
	kopsBudget = 30 * time.Minute
	// kopsTeardownBudget bounds its teardown.
	kopsTeardownBudget = 10 * time.Minute
	// busyboxPath is Debian's busybox-static on the host, shared into the
	// guest for the node's workload image.
	busyboxPath = "/bin/busybox"
	// kopsReplicas is REPLICAS of each run against the node, and
	// kopsRuns how many runs there are (two through the existing
	// provider, two through kops): each run's teardown deletes the PVs
	// its claims bound, so the node has volumes for every run.
	kopsReplicas = 3
	kopsRuns     = 4
	// kopsNodes is how many nodes the guest's cluster has: the second
	// takes the other of two runs at once (shared_test.go).
	kopsNodes = 2
	// vmSetupUnit is the guest image's own unit (clusters/vm), the only
	// skewtest* unit a guest has before and after a run.
	vmSetupUnit = "skewtest-vm-setup.service"
	// guestAPIServerPort is the guest port skewtest vm kops-node -port
	// forwards its API server from, and vm up -forward forwards to the
	// host.
	guestAPIServerPort = 6443
	// nodeInfoFile and nodeKubeconfigFile are what skewtest vm kops-node
	// writes into its -out directory: the node's description once it
	// can be tested, and the admin kubeconfig for the forwarded server.
	nodeInfoFile       = "node.json"
	nodeKubeconfigFile = "kubeconfig"
	// nodePoll is how often the suite looks for nodeInfoFile.
	nodePoll = 2 * time.Second
)

// killVersion is the plan's second kubelet: the kill comes once the run
// swapped the node's kubelet to it, before starting it.
var killVersion = strings.Split(plan.Default, ",")[1]

// nodeInfo is the part of nodeInfoFile the specs use: the suite reads the
// command's JSON as any consumer of skewtest vm kops-node would, not the
// Go type behind it (suites import no provider package).
type nodeInfo struct {
	// nodeLayout is the first node's, laid out as kops does.
	nodeLayout
	// More are the further nodes' (-nodes): kubelets beside the first,
	// on the same guest, for two runs at once on one shared cluster.
	More            []nodeLayout `json:"moreNodes"`
	KubeletVersion  string       `json:"kubeletVersion"`
	StorageClass    string       `json:"storageClass"`
	Image           string       `json:"image"`
	GuestKubeconfig string       `json:"guestKubeconfig"`
}

// nodeLayout is where one node's kubelet is, and what the existing
// provider is told of it.
type nodeLayout struct {
	Node                   string `json:"node"`
	KubeletUnit            string `json:"kubeletUnit"`
	KubeletBinary          string `json:"kubeletBinary"`
	KubeletUnitFile        string `json:"kubeletUnitFile"`
	KubeletEnvironmentFile string `json:"kubeletEnvironmentFile"`
	KubeletConfigFile      string `json:"kubeletConfigFile"`
	KubeletRootDir         string `json:"kubeletRootDir"`
	KubeletHealthzURL      string `json:"kubeletHealthzURL"`
	KubeletWrapper         string `json:"kubeletWrapper"`
}

// files are the layout's files in the guest.
func (l nodeLayout) files() []string {
	out := []string{l.KubeletUnitFile, l.KubeletBinary, l.KubeletEnvironmentFile, l.KubeletConfigFile}
	if l.KubeletWrapper != "" {
		out = append(out, l.KubeletWrapper)
	}
	return out
}

// nodes are every node's layout, the kops-laid first.
func (i nodeInfo) nodes() []nodeLayout { return append([]nodeLayout{i.nodeLayout}, i.More...) }

// kopsNode is `skewtest vm kops-node` running in the guest.
type kopsNode struct {
	info   nodeInfo
	dir    string            // its kubeconfig and node.json, shared with the host
	ownSHA map[string]string // node -> sha256 of its own kubelet
	stdin  *io.PipeWriter
	ready  chan struct{}
	done   chan error
}

// startKopsNode starts skewtest vm kops-node in the guest, for as long as
// its standard input stays open (stop closes it), with the API server
// forwarded to the host; ready closes once it wrote nodeInfoFile.
func startKopsNode(g *guestVM, src, bin, busybox, dir string) *kopsNode {
	GinkgoHelper()
	Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	server, ok := g.inst.Forwards[guestAPIServerPort]
	Expect(ok).To(BeTrue(), "the guest's API server port %d is not forwarded (vm show: %v)", guestAPIServerPort, g.inst.Forwards)
	k := &kopsNode{dir: dir, ready: make(chan struct{}), done: make(chan error, 1)}
	in, stdin := io.Pipe()
	k.stdin = stdin
	q := exec.ShellQuote
	script := fmt.Sprintf("cd %s && exec %s vm kops-node -out %s -server %s -port %d -busybox %s -pvs %d",
		q(src), q(bin), q(dir), q("https://"+server), guestAPIServerPort, q(busybox), kopsRuns*kopsReplicas+foreignReplicas) + fmt.Sprintf(" -nodes %d", kopsNodes)
	// Not the spec's context: the node serves the specs that follow.
	cmd := g.command(context.Background(), envArgv([]string{g.timeoutFactor()}, "sh", "-c", script)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = in, GinkgoWriter, GinkgoWriter
	ended := make(chan struct{})
	go func() {
		err := cmd.Run()
		close(ended)
		k.done <- err
	}()
	go func() {
		t := time.NewTicker(nodePoll)
		defer t.Stop()
		for {
			// kops-node writes it in one rename: all of it or none.
			if b, err := os.ReadFile(filepath.Join(dir, nodeInfoFile)); err == nil && json.Unmarshal(b, &k.info) == nil {
				close(k.ready)
				return
			}
			select {
			case <-ended:
				return
			case <-t.C:
			}
		}
	}()
	return k
}

// stop ends skewtest vm kops-node by closing its standard input and waits
// for its teardown.
func (k *kopsNode) stop(ctx context.Context) error {
	k.stdin.Close()
	select {
	case err := <-k.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("skewtest vm kops-node did not end: %w", context.Cause(ctx))
	}
}

func (k *kopsNode) kubeconfig() string { return filepath.Join(k.dir, nodeKubeconfigFile) }

// runEnv are the settings of `skewtest run` with the existing provider
// against node l, from the host, reports in artifacts.
func (k *kopsNode) runEnv(g *guestVM, l nodeLayout, artifacts string) []string {
	return []string{
		"PROVIDER=existing", "PLAN=" + plan.Default, "ARTIFACTS=" + artifacts,
		"KUBECONFIG=" + k.kubeconfig(), "NODES=" + l.Node,
		"SSH_USER=" + g.inst.User, "SSH_KEY=" + g.inst.KeyFile, "SSH_KNOWN_HOSTS=" + g.inst.KnownHostsFile,
		"SSH_ADDRESSES=" + l.Node + "=" + g.inst.SSHAddress,
		"KUBELET_UNIT=" + l.KubeletUnit, "KUBELET_BINARY=" + l.KubeletBinary, "KUBELET_ROOT_DIR=" + l.KubeletRootDir,
		"KUBELET_HEALTHZ_URL=" + l.KubeletHealthzURL,
		"STORAGE_CLASS=" + k.info.StorageClass, "IMAGE=" + k.info.Image, fmt.Sprintf("REPLICAS=%d", kopsReplicas),
		g.timeoutFactor(),
	}
}

// expectOwnKubelet checks that every node runs its own kubelet again,
// with nothing left beside it, and is Ready at its version through the
// API server.
func (k *kopsNode) expectOwnKubelet(ctx context.Context, g *guestVM) {
	GinkgoHelper()
	for _, l := range k.info.nodes() {
		Expect(g.must(ctx, "systemctl", "is-active", l.KubeletUnit)).To(Equal("active"), "node %s's kubelet unit", l.Node)
		Expect(g.must(ctx, "sh", "-c", `sha256sum "$1" | cut -d' ' -f1`, "sh", l.KubeletBinary)).To(Equal(k.ownSHA[l.Node]), "node %s's kubelet binary is not its own", l.Node)
		Expect(g.must(ctx, "sh", "-c", `ls -d "$1" "$1".* 2>/dev/null; true`, "sh", l.KubeletBinary)).To(Equal(l.KubeletBinary), "files left beside node %s's kubelet", l.Node)
		Expect(nodeState(ctx, k.kubeconfig(), l.Node)).To(Equal("Ready "+k.info.KubeletVersion), "node %s", l.Node)
	}
}

// expectNoRunNamespace checks that the node's cluster holds no namespace
// of a run's workload (one carrying a run's label): a run on the shared
// cluster (existing), its clean after a kill, and the fake kops's delete
// each remove it.
func (k *kopsNode) expectNoRunNamespace(ctx context.Context) {
	GinkgoHelper()
	Expect(runNamespaces(ctx, clientFor(k.kubeconfig()))).To(BeEmpty(), "namespaces of a run's workload in the node's cluster")
}

// nodeState is "Ready <kubelet version>" or what the node's Ready
// condition says instead, through the API server of kubeconfig.
func nodeState(ctx context.Context, kubeconfig, node string) (string, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return "", err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return "", err
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return "Ready " + n.Status.NodeInfo.KubeletVersion, nil
			}
			return fmt.Sprintf("Ready=%s (%s: %s)", c.Status, c.Reason, c.Message), nil
		}
	}
	return "", errors.New("no Ready condition")
}

// runUnits are the units in systemctl list-units --plain --no-legend
// output, but the guest's own vmSetupUnit.
func runUnits(listing string) []string {
	var out []string
	for _, line := range strings.Split(listing, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] != vmSetupUnit {
			out = append(out, line)
		}
	}
	return out
}

var (
	stateRE   = regexp.MustCompile(`msg="recorded the node's own kubelet".* state=(\S+)`)
	swappedRE = regexp.MustCompile(`msg="kubelet swapped".* version=(\S+)`)
)

// watchForSwap reads a run's log until the kubelet was swapped to
// version, and returns the state directory the run logged.
func watchForSwap(logs io.Reader, version string) (stateDir string, swapped bool) {
	sc := bufio.NewScanner(logs)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(GinkgoWriter, line)
		if m := stateRE.FindStringSubmatch(line); m != nil {
			stateDir = m[1]
		}
		if m := swappedRE.FindStringSubmatch(line); m != nil && m[1] == version {
			return stateDir, true
		}
	}
	return stateDir, false
}

// exitCode is err's exit code, 0 for nil.
func exitCode(err error) int { return exec.ExitCode(err) }
