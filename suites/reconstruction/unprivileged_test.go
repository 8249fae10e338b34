package reconstruction

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/capabilities"
	"sigs.k8s.io/skewtest/internal/testgate"
	"sigs.k8s.io/skewtest/reports"
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
		return envOptions(skewrun.DefaultPlan, "")
	})
	It("gives user nobody neither etcd, nor the API server beyond its health checks, nor the run's keys", func(ctx SpecContext) {
		d := providerOf(os.Getenv("PROVIDER"))
		if !unprivilegedRunsOn(d) {
			Skip("the control plane of PROVIDER=" + d.Name + " does not run on this host")
		}
		testgate.RequireRoot(GinkgoT(), "it makes a cluster and acts as user nobody with setpriv")
		testgate.RequireTools(GinkgoT(), "setpriv", "curl")
		v := strings.Split(skewrun.DefaultPlan, ",")[0]
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
