package kops

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/rest"

	"sigs.k8s.io/skewtest/clusters/internal/kubefake"

	"sigs.k8s.io/skewtest/clusters/kops/internal/fakeaws"
)

// testRun is one provider against the fakes.
type testRun struct {
	p         *provider
	store     *fakeaws.Store
	kube      *kubefake.Clientset
	artifacts string
	logs      *bytes.Buffer
}

// newTestRun makes a provider whose AWS is the fakes, whose kops and
// kubectl are the fake executables, and whose API server is client-go's
// fake clientset holding the worker's Node (filled in once update made the
// instance).
func newTestRun(t *testing.T, world func(*fakeaws.World)) *testRun {
	t.Helper()
	dir := t.TempDir()
	store := &fakeaws.Store{Path: filepath.Join(dir, "world.json")}
	if err := store.Update(func(w *fakeaws.World) error {
		if world != nil {
			world(w)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	kops, kubectl := writeFakeTools(t, dir, store.Path)
	logs := &bytes.Buffer{}
	cfg := Config{
		RunID: "20261201-080000-ab12", Kops: kops, Kubectl: kubectl, Region: "us-east-1", Owner: "sig-storage",
		AdminAccess: "203.0.113.7/32", APIServerVersion: version.MustParseSemantic("v1.37.2"),
		RunDir: filepath.Join(dir, "run"), ArtifactsDir: filepath.Join(dir, "artifacts"), CacheDir: filepath.Join(dir, "cache"),
		ValidateTimeout: time.Minute, Logger: slog.New(slog.NewTextHandler(logs, nil)),
	}
	p, err := newProvider(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr := &testRun{p: p, store: store, kube: kubefake.New(), artifacts: cfg.ArtifactsDir, logs: logs}
	p.clients = fakeClients(t, store)
	p.validateRetry = 10 * time.Millisecond
	p.settleTimeout = 500 * time.Millisecond
	p.kube = func(*rest.Config) (kubeAPI, error) {
		tr.syncNodes(t)
		return tr.kube, nil
	}
	return tr
}

// syncNodes registers the fake world's running instances as Nodes, as
// their kubelets would.
func (tr *testRun) syncNodes(t *testing.T) {
	w := readWorld(t, tr.store)
	for _, i := range w.Instances {
		if i.State != "running" {
			continue
		}
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-" + strings.ReplaceAll(i.PrivateIP, ".", "-") + ".ec2.internal", Labels: map[string]string{}},
			Spec:   corev1.NodeSpec{ProviderID: "aws:///" + i.Zone + "/" + i.ID},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: i.PrivateIP}}}}
		if _, ok := i.Tags["k8s.io/role/control-plane"]; ok {
			n.Labels["node-role.kubernetes.io/control-plane"] = ""
		}
		_, _ = tr.kube.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{})
	}
}

// calls are the fake kops's calls, verb first.
func (tr *testRun) calls(t *testing.T) []string {
	var out []string
	for _, c := range readWorld(t, tr.store).KopsCalls {
		out = append(out, strings.Join(c, " "))
	}
	return out
}

func verbs(calls []string) []string {
	var out []string
	for _, c := range calls {
		f := strings.Fields(c)
		out = append(out, strings.Join(f[:min(2, len(f))], " "))
	}
	return out
}

// leftovers are the fake world's resources not yet gone.
func (tr *testRun) leftovers(t *testing.T) []string {
	w := readWorld(t, tr.store)
	var out []string
	for _, i := range w.Instances {
		if i.State != "terminated" && i.State != "shutting-down" {
			out = append(out, "instance "+i.ID+" "+i.State)
		}
	}
	for _, v := range w.Volumes {
		out = append(out, "volume "+v.ID)
	}
	for _, g := range w.Groups {
		out = append(out, "security-group "+g.ID)
	}
	for _, l := range w.LBs {
		out = append(out, "load-balancer "+l.ARN)
	}
	for c := range w.Clusters {
		out = append(out, "kops cluster "+c)
	}
	return out
}

func (tr *testRun) buckets(t *testing.T) []string {
	out, err := tr.p.clients.S3.ListBuckets(context.Background(), &s3.ListBucketsInput{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range out.Buckets {
		names = append(names, aws.ToString(b.Name))
	}
	return names
}

// TestLifecycleAgainstFakes is a whole round against the fakes: Up with
// kubetest2-kops's calls and flags (validate asked again while it exits
// 2), the state store bucket made and tagged, the worker found by its
// tags with its host key from the console; then the log dump, Down with
// kops delete cluster, the bucket deleted, the sweep finding nothing, and
// the report's facts.
func TestLifecycleAgainstFakes(t *testing.T) {
	t.Parallel()
	tr := newTestRun(t, func(w *fakeaws.World) { w.NotValidFor = 2 })
	ctx := t.Context()
	if err := tr.p.Up(ctx); err != nil {
		t.Fatalf("Up: %v\n%s", err, tr.logs)
	}
	calls := tr.calls(t)
	wantVerbs := []string{"get cluster", "create cluster", "update cluster", "validate cluster", "validate cluster", "validate cluster", "toolbox dump"}
	if got := verbs(calls); !slices.Equal(got, wantVerbs) {
		t.Fatalf("kops calls %q, want %q", got, wantVerbs)
	}
	create := calls[1]
	name := tr.p.cfg.ClusterName()
	for _, want := range []string{"--name " + name, "--cloud aws", "--kubernetes-version v1.37.2", "--control-plane-count 1", "--node-count 1",
		"--ssh-public-key " + filepath.Join(tr.p.cfg.RunDir, "id_ed25519.pub"), "--admin-access 203.0.113.7/32", "--zones us-east-1a",
		"--cloud-labels skewtest.k8s.io/expiry=", "skewtest.k8s.io/owner=sig-storage", "skewtest.k8s.io/run-id=20261201-080000-ab12"} {
		if !strings.Contains(create, want) {
			t.Errorf("kops create cluster lacks %q: %s", want, create)
		}
	}
	if !strings.HasSuffix(calls[2], "--yes --admin") {
		t.Errorf("update: %s", calls[2])
	}
	if !strings.Contains(calls[3], "--wait ") {
		t.Errorf("validate without --wait: %s", calls[3])
	}
	bucket := runBucket(tr.p.cfg.RunID)
	if got := tr.buckets(t); !slices.Equal(got, []string{bucket}) {
		t.Fatalf("buckets %v, want the run's %s", got, bucket)
	}
	tags, err := bucketTags(ctx, tr.p.clients.S3, bucket)
	if err != nil || tags[tagRunID] != tr.p.cfg.RunID || tags[tagOwner] != "sig-storage" || tags[tagExpiry] == "" {
		t.Fatalf("bucket tags %v, %v", tags, err)
	}
	ns, err := tr.p.TestNodes(ctx)
	if err != nil || len(ns) != 1 || ns[0].String() != "ip-172-20-1-1.ec2.internal" {
		t.Fatalf("test nodes %v, %v", ns, err)
	}
	kh, err := os.ReadFile(filepath.Join(tr.p.cfg.RunDir, "known_hosts"))
	if err != nil || !strings.Contains(string(kh), "198.51.100.11") || !strings.Contains(string(kh), "ssh-ed25519") {
		t.Fatalf("known_hosts %q, %v", kh, err)
	}

	logs := filepath.Join(tr.artifacts, "logs")
	if err := tr.p.DumpClusterLogs(ctx, logs); err != nil {
		t.Fatalf("dump: %v", err)
	}
	for _, f := range []string{"nodes/kubelet.log", "kops-get-cluster.yaml", "kops-get-instancegroups.yaml", "cluster-info/nodes.json", "kubectl-persistentvolumes.yaml", "kops-commands.log"} {
		if _, err := os.Stat(filepath.Join(logs, f)); err != nil {
			t.Errorf("dump lacks %s: %v", f, err)
		}
	}
	calls = tr.calls(t)
	if err := tr.p.Down(ctx); err != nil {
		t.Fatalf("Down: %v\n%s", err, tr.logs)
	}
	after := verbs(tr.calls(t)[len(calls):])
	if !slices.Contains(after, "delete cluster") || slices.Contains(after, "toolbox dump") {
		t.Errorf("Down's kops calls %q: want delete cluster and no second dump", after)
	}
	if left := tr.leftovers(t); len(left) > 0 {
		t.Errorf("left on the fake AWS: %v", left)
	}
	if got := tr.buckets(t); len(got) > 0 {
		t.Errorf("buckets left: %v", got)
	}
	if _, err := os.Stat(tr.p.cfg.RunDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("run directory still there: %v", err)
	}
	facts := map[string]string{}
	for _, kv := range tr.p.RunFacts() {
		facts[kv.Key] = kv.Value
	}
	if facts["AWS instances"] != "c5.large, c5.large" || !strings.HasPrefix(facts["AWS wall time and cost estimate"], "USD ") ||
		facts["Post-run sweep"] != "nothing carried the run's tags after Down" {
		t.Errorf("facts %v", facts)
	}
	t.Logf("facts: %v", facts)
}

// TestUpDeletesLeftoverClusterFirst: a cluster of the same name is
// deleted before create, as kubetest2-kops's Up runs Down first.
func TestUpDeletesLeftoverClusterFirst(t *testing.T) {
	t.Parallel()
	var tr *testRun
	tr = newTestRun(t, func(w *fakeaws.World) {
		w.Clusters["skewtest-20261201-080000-ab12.k8s.local"] = true
	})
	if err := tr.p.Up(t.Context()); err != nil {
		t.Fatalf("Up: %v", err)
	}
	got := verbs(tr.calls(t))
	if len(got) < 3 || got[0] != "get cluster" || got[1] != "delete cluster" || got[2] != "create cluster" {
		t.Fatalf("kops calls %q, want get, delete, then create", got)
	}
	if err := tr.p.Down(t.Context()); err != nil {
		t.Fatal(err)
	}
	if left := tr.leftovers(t); len(left) > 0 {
		t.Errorf("left: %v", left)
	}
}

// TestDownAfterFailedUp: the cluster never validates (exit 2 until the
// timeout); Down dumps the logs into the artifacts, deletes the cluster
// and the bucket, and leaves nothing.
func TestDownAfterFailedUp(t *testing.T) {
	t.Parallel()
	tr := newTestRun(t, func(w *fakeaws.World) { w.NotValidFor = 1000 })
	tr.p.cfg.ValidateTimeout = 300 * time.Millisecond
	err := tr.p.Up(t.Context())
	if err == nil || !strings.Contains(err.Error(), "validate cluster") || !strings.Contains(err.Error(), "exited 2") {
		t.Fatalf("Up: %v, want validate's exit 2 after the timeout", err)
	}
	if err := tr.p.Down(t.Context()); err != nil {
		t.Fatalf("Down: %v", err)
	}
	if !slices.Contains(verbs(tr.calls(t)), "toolbox dump") {
		t.Error("Down after a failed Up did not dump logs")
	}
	if _, err := os.Stat(filepath.Join(tr.artifacts, "logs", "nodes", "kubelet.log")); err != nil {
		t.Errorf("the dump is not in the artifacts: %v", err)
	}
	if left := tr.leftovers(t); len(left) > 0 {
		t.Errorf("left: %v", left)
	}
	if b := tr.buckets(t); len(b) > 0 {
		t.Errorf("buckets left: %v", b)
	}
}

// TestDownAfterSIGINT: a real SIGINT to this process while kops update
// cluster hangs cancels Up (the kops process is killed); Down then
// deletes what update had made.
func TestDownAfterSIGINT(t *testing.T) {
	tr := newTestRun(t, func(w *fakeaws.World) { w.HangOnUpdate = true })
	ctx, stop := signal.NotifyContext(t.Context(), os.Interrupt)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- tr.p.Up(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for !slices.Contains(verbs(tr.calls(t)), "update cluster") {
		if time.Now().After(deadline) {
			t.Fatal("kops update cluster never ran")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Up did not return after SIGINT")
	}
	if err == nil || ctx.Err() == nil {
		t.Fatalf("Up after SIGINT: %v", err)
	}
	pid := readWorld(t, tr.store).KopsPID
	if syscall.Kill(pid, 0) == nil {
		t.Errorf("the hanging kops (pid %d) still runs", pid)
	}
	if err := tr.p.Down(context.WithoutCancel(ctx)); err != nil {
		t.Fatalf("Down: %v", err)
	}
	if left := tr.leftovers(t); len(left) > 0 {
		t.Errorf("left: %v", left)
	}
	if b := tr.buckets(t); len(b) > 0 {
		t.Errorf("buckets left: %v", b)
	}
}

// TestSweepDeletesWhatKopsLeft: kops delete cluster leaves the run's PVC
// volume (still reading in-use after its instance went) and a security
// group; the sweep waits for EC2 to catch up, deletes both and reports
// them.
func TestSweepDeletesWhatKopsLeft(t *testing.T) {
	t.Parallel()
	tr := newTestRun(t, func(w *fakeaws.World) { w.LeakOnDelete = true })
	ctx := t.Context()
	if err := tr.p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	var pvc string
	if err := tr.store.Update(func(w *fakeaws.World) error {
		pvc = w.ID("vol")
		w.Volumes = append(w.Volumes, &fakeaws.Volume{ID: pvc, Tags: map[string]string{tagCluster: tr.p.cfg.ClusterName(), tagRunID: tr.p.cfg.RunID},
			Attachments: []fakeaws.Attachment{{Instance: tr.p.node.instance.ID, State: "attached"}}})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := tr.p.Down(ctx); err != nil {
		t.Fatalf("Down: %v", err)
	}
	if left := tr.leftovers(t); len(left) > 0 {
		t.Errorf("left after the sweep: %v", left)
	}
	kinds := map[string]bool{}
	for _, r := range tr.p.sweep {
		if !r.Deleted {
			t.Errorf("sweep did not delete %s", r)
		}
		kinds[r.Kind+" "+r.ID] = true
	}
	if !kinds["volume "+pvc] || len(tr.p.sweep) < 2 {
		t.Errorf("sweep found %v, want the PVC volume %s and the security group", tr.p.sweep, pvc)
	}
	b, err := os.ReadFile(filepath.Join(tr.artifacts, "logs", "kops-sweep.txt"))
	if err != nil || !strings.Contains(string(b), pvc) {
		t.Errorf("sweep record %q, %v", b, err)
	}
}

// TestCredentialsNeverInArtifacts plants a secret in the environment the
// AWS SDK and kops read; the fake kops echoes it on a validate error and
// writes it into its dump, as tools that copy environments do. It must
// reach kops, and appear in no artifact, run file or log line.
func TestCredentialsNeverInArtifacts(t *testing.T) {
	const secret = "PLANTEDsecret0123456789abcdefPLANTED"
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAPLANTED000000000")
	tr := newTestRun(t, func(w *fakeaws.World) { w.NotValidFor = 1 })
	ctx := t.Context()
	if err := tr.p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tr.p.DumpClusterLogs(ctx, filepath.Join(tr.artifacts, "logs")); err != nil {
		t.Fatal(err)
	}
	runDirCopy := t.TempDir()
	copyDir(t, tr.p.cfg.RunDir, runDirCopy)
	if err := tr.p.Down(ctx); err != nil {
		t.Fatal(err)
	}
	if !readWorld(t, tr.store).SecretSeen {
		t.Fatal("the credentials did not reach kops")
	}
	files := 0
	for _, dir := range []string{tr.artifacts, runDirCopy} {
		filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			files++
			b, _ := os.ReadFile(path)
			for _, s := range []string{secret, "AKIAPLANTED000000000"} {
				if bytes.Contains(b, []byte(s)) {
					t.Errorf("%s holds a planted credential", path)
				}
			}
			return nil
		})
	}
	if bytes.Contains(tr.logs.Bytes(), []byte(secret)) {
		t.Error("the log holds the planted secret")
	}
	facts := ""
	for _, kv := range tr.p.RunFacts() {
		facts += kv.Value
	}
	if strings.Contains(facts, secret) {
		t.Error("the report's facts hold the planted secret")
	}
	if b, _ := os.ReadFile(filepath.Join(tr.artifacts, "logs", "kops-commands.log")); !bytes.Contains(b, []byte(redacted)) {
		t.Error("the command log shows no redaction: the planted secret never passed through it, so the check proves nothing")
	}
	t.Logf("grepped %d files", files)
}

func copyDir(t *testing.T, src, dst string) {
	filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err == nil {
			err = os.WriteFile(filepath.Join(dst, strings.ReplaceAll(strings.TrimPrefix(path, src), "/", "_")), b, 0o600)
		}
		return err
	})
}

var _ runtime.Object = &corev1.Node{}
