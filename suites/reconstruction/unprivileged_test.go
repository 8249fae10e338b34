package reconstruction

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/capabilities"
	skewexec "sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/internal/testgate"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/plan"
	"sigs.k8s.io/skewtest/scenarios/skewrun"
)

// nobody is the unprivileged user the spec acts as.
const nobody = "65534"

// unprivilegedRunsOn: providers whose control plane runs on this host,
// where another local user could reach it.
func unprivilegedRunsOn(d clusters.Descriptor) bool { return d.KubeletsOnHost }

var unprivilegedLabels = Label(append([]string{"security"}, providersWhere(unprivilegedRunsOn)...)...)

// skewtest runs as root: a cluster it makes on this host must give another
// local user no way in. etcd on plain HTTP, measured before, answered any
// user, who could then write a role binding and have the run's root
// kubelet start a privileged hostPath pod.
var _ = Describe("a cluster made on this host, seen by another local user", unprivilegedLabels, func() {
	needsBinaries(unprivilegedLabels, func() *skewrun.Options {
		if !unprivilegedRunsOn(providerOf(os.Getenv("PROVIDER"))) {
			return nil
		}
		return envOptions(plan.Default, "")
	})
	It("gives user nobody neither etcd, nor the API server beyond its health checks, nor the kubelet API, nor the run's sockets and keys", func(ctx SpecContext) {
		d := providerOf(os.Getenv("PROVIDER"))
		if !unprivilegedRunsOn(d) {
			Skip("the control plane of PROVIDER=" + d.Name + " does not run on this host")
		}
		testgate.RequireRoot(GinkgoT(), "it makes a cluster and acts as user nobody with setpriv")
		testgate.RequireTools(GinkgoT(), "setpriv", "curl")
		v := strings.Split(plan.Default, ",")[0]
		r := &binaries.Resolver{CacheDir: binaries.DefaultCacheDir(), Module: &binaries.ModuleBuilder{CacheDir: binaries.DefaultCacheDir()}}
		kubelet, err := r.Resolve(ctx, "kubelet", "module:"+v)
		Expect(err).NotTo(HaveOccurred())
		prov, err := clusters.New(d.Name, clusters.Options{RunID: reports.NewRunID(time.Now()), CacheDir: binaries.DefaultCacheDir(),
			Logger: slog.New(slog.NewTextHandler(GinkgoWriter, nil)), APIServerVersion: version.MustParseSemantic(v), InitialKubelets: []binaries.Binary{kubelet}}, nil)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { Expect(prov.Down(ctx)).To(Succeed()) }, NodeTimeout(3*time.Minute))
		Expect(prov.Up(ctx)).To(Succeed())
		rd, ok := prov.(capabilities.WithRunDir)
		Expect(ok).To(BeTrue(), "the %s provider keeps its cluster in a run directory", prov.Name())

		By("etcd answers no client without the run's certificate, on HTTP or HTTPS")
		etcd := etcdClientURL(rd.RunDir())
		Expect(etcd).NotTo(BeEmpty(), "no etcd of the run found by its --data-dir under %s", rd.RunDir())
		u, err := url.Parse(strings.Split(etcd, ",")[0])
		Expect(err).NotTo(HaveOccurred(), "etcd's --listen-client-urls %q", etcd)
		hostPort := u.Host
		for _, target := range []string{"http://" + hostPort + "/v3/kv/range", "https://" + hostPort + "/v3/kv/range"} {
			out, err := asNobody(ctx, "curl", "-sk", "-m", "5", "-X", "POST", "-d", `{"key":"AA==","range_end":"AA=="}`, target)
			Expect(err).To(HaveOccurred(), "user nobody read etcd at %s: %s", target, out)
			Expect(out).NotTo(ContainSubstring("revision"), "user nobody got an etcd answer from %s", target)
		}

		By("the API server answers nobody's anonymous requests only on its health checks")
		rc, err := prov.RESTConfig()
		Expect(err).NotTo(HaveOccurred())
		for path, allowed := range map[string]bool{"/healthz": true, "/readyz": true, "/livez": true,
			"/api/v1/namespaces/kube-system/secrets": false, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings": false, "/api/v1/nodes": false} {
			code, err := asNobody(ctx, "curl", "-sk", "-m", "5", "-o", "/dev/null", "-w", "%{http_code}", rc.Host+path)
			Expect(err).NotTo(HaveOccurred(), "curl %s as nobody", path)
			if allowed {
				Expect(code).To(Equal("200"), "GET %s as nobody", path)
			} else {
				Expect(code).To(BeElementOf("401", "403"), "GET %s as nobody must be refused", path)
			}
		}

		By("the kubelet API answers nobody with 401 or 403, health checks included")
		cs, err := kubernetes.NewForConfig(rc)
		Expect(err).NotTo(HaveOccurred())
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(nodes.Items).NotTo(BeEmpty(), "the run's cluster has no node")
		for _, n := range nodes.Items {
			base := kubeletAPI(n)
			Expect(base).NotTo(BeEmpty(), "node %s reports no internal address or kubelet port", n.Name)
			for _, path := range []string{"/pods", "/runningpods/", "/configz", "/metrics", "/healthz"} {
				code, err := asNobody(ctx, "curl", "-sk", "-m", "5", "-o", "/dev/null", "-w", "%{http_code}", base+path)
				Expect(err).NotTo(HaveOccurred(), "curl %s%s as nobody", base, path)
				Expect(code).To(BeElementOf("401", "403"), "GET %s%s as nobody must be refused", base, path)
			}
		}

		By("no socket of the run lets nobody connect: containerd, the CSI driver, the kubelet's")
		socks, err := listeningSockets(rd.RunDir(), deviceManagerDir)
		Expect(err).NotTo(HaveOccurred())
		Expect(socks).To(ContainElement(HaveSuffix("/containerd.sock")), "no containerd socket of the run among %v", socks)
		Expect(socks).To(ContainElement(HaveSuffix("/csi.sock")), "no CSI driver socket of the run among %v", socks)
		for _, s := range socks {
			// curl's exit code 7 is "could not connect"; any other
			// (an HTTP answer, or a gRPC server closing on HTTP/1.1)
			// means the connection was made.
			out, err := asNobody(ctx, "curl", "-sS", "-m", "5", "--unix-socket", s, "http://localhost/")
			Expect(skewexec.ExitCode(err)).To(Equal(curlCouldNotConnect), "user nobody connected to %s (%v): %s", s, err, out)
		}

		By("the run's private keys are root's alone")
		keys, err := filepath.Glob(filepath.Join(rd.RunDir(), "pki", "*.key"))
		Expect(err).NotTo(HaveOccurred())
		Expect(keys).NotTo(BeEmpty(), "no keys under %s/pki", rd.RunDir())
		for _, k := range keys {
			out, err := asNobody(ctx, "cat", k)
			Expect(err).To(HaveOccurred(), "user nobody read %s: %d bytes", k, len(out))
		}
	})
})

// deviceManagerDir is where every kubelet serves device plugin
// registration, whatever its --root-dir: the path is compiled in, and a
// registered device plugin chooses the devices and mounts of containers.
const deviceManagerDir = "/var/lib/kubelet/device-plugins"

// curlCouldNotConnect is curl's exit code when it made no connection.
const curlCouldNotConnect = 7

// kubeletAPI is the https base URL of node n's kubelet API, from the
// node's status, or "" when the status names no address or port.
func kubeletAPI(n corev1.Node) string {
	port := n.Status.DaemonEndpoints.KubeletEndpoint.Port
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && port > 0 {
			return "https://" + net.JoinHostPort(a.Address, strconv.Itoa(int(port)))
		}
	}
	return ""
}

// listeningSockets are the paths of the unix sockets listening under any
// of dirs, read from /proc/net/unix: every socket a daemon of the run
// serves, whichever daemon made it.
func listeningSockets(dirs ...string) ([]string, error) {
	b, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, line := range strings.Split(string(b), "\n")[1:] {
		// Num RefCount Protocol Flags Type St Inode Path; St 01 is
		// listening (SS_UNCONNECTED with __SO_ACCEPTCON in Flags).
		f := strings.Fields(line)
		if len(f) < 8 || f[3] != "00010000" {
			continue
		}
		path := f[7]
		for _, d := range dirs {
			if strings.HasPrefix(path, strings.TrimSuffix(d, "/")+"/") && !seen[path] {
				seen[path] = true
				out = append(out, path)
			}
		}
	}
	return out, nil
}

// etcdClientURL is the client URL of the etcd whose data dir lies in
// runDir, read from its command line.
func etcdClientURL(runDir string) string {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	re := regexp.MustCompile(`--listen-client-urls=(\S+)`)
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		if !strings.Contains(cmd, "etcd") || !strings.Contains(cmd, "--data-dir="+runDir) {
			continue
		}
		if m := re.FindStringSubmatch(cmd); m != nil {
			return m[1]
		}
	}
	return ""
}

// asNobody runs a command as user and group nobody, without supplementary
// groups, and returns its standard output.
func asNobody(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "setpriv", append([]string{"--reuid=" + nobody, "--regid=" + nobody, "--clear-groups", "--", name}, args...)...)
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
	}
	return strings.TrimSpace(string(out)), err
}
