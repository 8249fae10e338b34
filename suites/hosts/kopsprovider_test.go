package hosts

// The kops provider end to end inside the guest, against the kops-style
// node, with fakes where the real thing cannot exist here:
//
//   - a fake kops (clusters/kops/internal/fakeaws, run through a link named
//     kops first on PATH), whose update cluster makes EC2 instances that
//     are this guest: its address, reached over SSH on port 22 and checked
//     against its real host keys, printed on the fake console; the run's
//     SSH key installed in root's authorized_keys as cloud-init would;
//     the kops-style node's cluster as the admin kubeconfig;
//   - a fake EC2, Elastic Load Balancing v2 and S3 (the same package,
//     `fakeaws serve` on the guest's loopback), reached through the AWS
//     SDK's own endpoint setting, AWS_ENDPOINT_URL, with credentials made
//     for the spec.
//
// Everything else is real: skewtest run with PROVIDER=kops, the node's
// kubelet under systemd, the swaps over SSH, the scenario's pods and
// volumes, kops delete cluster and the sweep.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/scenarios/plan"
)

const (
	// fakeAWSPkg is the fakes' program, built on the host.
	fakeAWSPkg = "./clusters/kops/internal/fakeaws/cmd/fakeaws"
	// fakeAWSDir holds each kops run's fake world in the guest: root's
	// own directory, not a share.
	fakeAWSDir = "/root/skewtest-fakeaws"
	// guestAuthorizedKeys is where the fake kops installs the run's key.
	guestAuthorizedKeys = "/root/.ssh/authorized_keys"
	// fakeKeyMark is the comment the fake kops gives the key it installs.
	fakeKeyMark = "fake-kops:"
	// tagCluster is kops's cluster tag on what it makes.
	tagCluster = "KubernetesCluster"
	// exitInterrupted is skewtest's exit code after SIGINT (128 + 2).
	exitInterrupted = 130
	// kopsSignalBudget bounds the guest command that signals a run.
	kopsSignalBudget = time.Minute
)

// buildFakeAWS builds the fakes into dir, with the link named kops in
// dir/fakebin that makes the program the fake kops.
func buildFakeAWS(ctx context.Context, src, dir string) {
	GinkgoHelper()
	build := osexec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(dir, "fakeaws"), fakeAWSPkg)
	build.Dir, build.Env = src, append(os.Environ(), "CGO_ENABLED=0")
	o, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "go build %s: %s", fakeAWSPkg, o)
	Expect(os.MkdirAll(filepath.Join(dir, "fakebin"), 0o755)).To(Succeed())
	Expect(os.Symlink("../fakeaws", filepath.Join(dir, "fakebin", "kops"))).To(Succeed())
}

// kopsRun is skewtest run with PROVIDER=kops in the guest.
type kopsRun struct {
	name      string // its fake world's directory under fakeAWSDir
	artifacts string // on the host (shared)
	secret    string
	cmd       *osexec.Cmd
	log       *bufio.Scanner // the run's stderr
	done      chan error
}

// world is the part of the fake world the specs check.
type world struct {
	Instances []struct {
		ID, State string
		Tags      map[string]string
	} `json:"instances"`
	Volumes   []tagged        `json:"volumes"`
	Groups    []tagged        `json:"groups"`
	LBs       []tagged        `json:"lbs"`
	Clusters  map[string]bool `json:"clusters"`
	KopsCalls [][]string      `json:"kopsCalls"`
	Calls     map[string]int  `json:"calls"`
}

// tagged is a volume, group or load balancer of the fake world.
type tagged struct {
	Tags map[string]string `json:"tags"`
}

// startKopsRun starts skewtest run with PROVIDER=kops in the guest, its
// fakes beside it. When ctx ends (the spec's deadline, an interrupted
// suite), the run gets SIGINT, as a user's Ctrl-C, and kopsTeardownBudget
// to delete its cluster before it is killed.
func (k *kopsNode) startKopsRun(ctx context.Context, g *guestVM, src, bin, binDir, name, artifacts string) *kopsRun {
	GinkgoHelper()
	akid, secret := fakeCredentials()
	r := &kopsRun{name: name, artifacts: artifacts, secret: secret, done: make(chan error, 1)}
	d := fakeAWSDir + "/" + name
	q := exec.ShellQuote
	script := strings.Join([]string{
		"set -u",
		"IFS= read -r AWS_SECRET_ACCESS_KEY; export AWS_SECRET_ACCESS_KEY",
		"rm -rf " + q(d) + " && mkdir -p " + q(d) + " && chmod 0700 " + q(fakeAWSDir) + " || exit 3",
		q(binDir+"/fakeaws") + " node -world " + q(d+"/world.json") + " -kubeconfig " + q(k.info.GuestKubeconfig) + " -node " + q(k.info.Node) +
			" -authorized-keys " + q(guestAuthorizedKeys) + " || exit 3",
		q(binDir+"/fakeaws") + " serve -world " + q(d+"/world.json") + " -url-file " + q(d+"/url") + " & srv=$!",
		"trap 'kill $srv 2>/dev/null; wait $srv 2>/dev/null' EXIT",
		"i=0; while [ ! -s " + q(d+"/url") + " ]; do i=$((i+1)); if [ $i -gt 600 ]; then echo 'fakeaws serve did not start' >&2; exit 3; fi; sleep 0.1; done",
		"AWS_ENDPOINT_URL=$(cat " + q(d+"/url") + "); export AWS_ENDPOINT_URL",
		"PATH=" + q(binDir+"/fakebin") + ":$PATH; export PATH",
		"cd " + q(src) + " && " + q(bin) + " run & run=$!",
		"echo $run > " + q(d+"/run.pid"),
		"wait $run",
	}, "\n")
	env := []string{"PROVIDER=kops", "PLAN=" + plan.Default, "ARTIFACTS=" + artifacts,
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=" + akid, "SKEWTEST_FAKE_WORLD=" + d + "/world.json",
		// No checkip.amazonaws.com from the guest: the fake EC2 does
		// not filter on it.
		"KOPS_ADMIN_ACCESS=10.0.2.2/32",
		"STORAGE_CLASS=" + k.info.StorageClass, "IMAGE=" + k.info.Image, fmt.Sprintf("REPLICAS=%d", kopsReplicas),
		g.timeoutFactor()}
	outR, outW := io.Pipe()
	r.log = bufio.NewScanner(outR)
	r.cmd = g.command(ctx, envArgv(env, "sh", "-c", script)...)
	r.cmd.Cancel = func() error {
		// Not ctx: it has ended.
		sctx, cancel := context.WithTimeout(context.Background(), kopsSignalBudget)
		defer cancel()
		return r.signal(sctx, g, "INT")
	}
	r.cmd.WaitDelay = kopsTeardownBudget
	r.cmd.Stdin, r.cmd.Stdout, r.cmd.Stderr = strings.NewReader(secret+"\n"), GinkgoWriter, outW
	go func() {
		err := r.cmd.Run()
		outW.Close()
		r.done <- err
	}()
	return r
}

// signal sends the run in the guest SIG (INT, TERM, ...).
func (r *kopsRun) signal(ctx context.Context, g *guestVM, sig string) error {
	_, err := g.output(ctx, "sh", "-c", "kill -"+sig+" $(cat "+exec.ShellQuote(fakeAWSDir+"/"+r.name+"/run.pid")+")")
	return err
}

// wait reads the run's log to its end and returns its exit.
func (r *kopsRun) wait() error {
	for r.log.Scan() {
		fmt.Fprintln(GinkgoWriter, r.log.Text())
	}
	return <-r.done
}

// interruptAfterSwap reads the run's log until the kubelet was swapped to
// version, then sends the run SIGINT; the rest of the log is read by wait.
func (r *kopsRun) interruptAfterSwap(ctx context.Context, g *guestVM, version string) {
	GinkgoHelper()
	for r.log.Scan() {
		line := r.log.Text()
		fmt.Fprintln(GinkgoWriter, line)
		if m := swappedRE.FindStringSubmatch(line); m != nil && m[1] == version {
			Expect(r.signal(ctx, g, "INT")).To(Succeed())
			return
		}
	}
	Fail(fmt.Sprintf("the kops run ended before it swapped the kubelet to %s", version))
}

// world reads the run's fake world from the guest.
func (r *kopsRun) world(ctx context.Context, g *guestVM) world {
	GinkgoHelper()
	var w world
	Expect(json.Unmarshal([]byte(g.must(ctx, "cat", fakeAWSDir+"/"+r.name+"/world.json")), &w)).To(Succeed())
	return w
}

// expectDeletedAndSwept checks that the run made its cluster, deleted it
// through kops, and left nothing of it in the fake AWS: no running
// instance, no group, load balancer or volume tagged with it, its state
// store bucket deleted, and the key kops installed on the node gone.
func (r *kopsRun) expectDeletedAndSwept(ctx context.Context, g *guestVM) {
	GinkgoHelper()
	w := r.world(ctx, g)
	var verbs []string
	for _, c := range w.KopsCalls {
		if len(c) > 1 {
			verbs = append(verbs, c[0]+" "+c[1])
		}
	}
	AddReportEntry("kops calls of "+r.name, strings.Join(verbs, ", "))
	Expect(verbs).To(ContainElements("create cluster", "update cluster", "validate cluster", "delete cluster"))
	Expect(slices.Index(verbs, "delete cluster")).To(BeNumerically(">", slices.Index(verbs, "update cluster")))
	Expect(w.Clusters).To(BeEmpty(), "clusters the fake kops still has")
	var cluster string
	for _, c := range w.KopsCalls {
		if len(c) > 1 && c[0] == "create" {
			for i := range c[:len(c)-1] {
				if c[i] == "--name" {
					cluster = c[i+1]
				}
			}
		}
	}
	Expect(cluster).NotTo(BeEmpty(), "no kops create cluster --name")
	for _, i := range w.Instances {
		if i.Tags[tagCluster] == cluster {
			Expect(i.State).To(BeElementOf("shutting-down", "terminated"), "instance %s of %s", i.ID, cluster)
		}
	}
	tagged := 0
	for _, t := range slices.Concat(w.Groups, w.LBs, w.Volumes) {
		if t.Tags[tagCluster] == cluster {
			tagged++
		}
	}
	Expect(tagged).To(BeZero(), "groups, load balancers and volumes of %s left", cluster)
	Expect(w.Calls["s3 DELETE"]).To(BeNumerically(">", 0), "the run's state store bucket was never deleted; calls: %v", w.Calls)
	Expect(g.must(ctx, "cat", guestAuthorizedKeys)).NotTo(ContainSubstring(fakeKeyMark), "the key kops installed is still authorized on the node")
	AddReportEntry("fake AWS calls of "+r.name, fmt.Sprint(w.Calls))
}

// expectNoSecret checks that the fake AWS secret is in no file of the
// run's artifacts (kops's own dumps print it; the provider scrubs them).
func (r *kopsRun) expectNoSecret() {
	GinkgoHelper()
	n := 0
	Expect(filepath.Walk(r.artifacts, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return err
		}
		n++
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		Expect(string(b)).NotTo(ContainSubstring(r.secret), "the AWS secret is in %s", p)
		return nil
	})).To(Succeed())
	Expect(n).To(BeNumerically(">", 0), "no artifacts under %s", r.artifacts)
}

// fakeCredentials are an access key ID and secret for the spec's fake
// AWS, which answers no other.
func fakeCredentials() (id, secret string) {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return "AKIAFAKE" + strings.ToUpper(hex.EncodeToString(b[:8])), hex.EncodeToString(b[8:])
}
