package main

// `skewtest run` and `skewtest matrix` with valid settings for each
// provider whose checks need no cluster: the built binary, a clean
// environment, fakes for what would reach a cloud or a cluster, and every
// network endpoint at a loopback port that refuses. The run must get past
// validation, which is what a user saw fail (exit 2, "PROVIDER=kops is not
// set up: kops: no run ID", because validation ran before the run had an
// ID), and then fail fast on the refused endpoint, as an infrastructure
// failure.

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/clusters/binaries/binariestest"
)

// runDeadline bounds each run; at it the run gets SIGINT (and tears down),
// and is killed if it has not exited 30 seconds later. Runs take about a
// second.
const runDeadline = 2 * time.Minute

// refusedAddr is a loopback address nothing listens on (port 1 needs root
// to bind). Every cloud, cluster and download endpoint points at it.
const refusedAddr = "127.0.0.1:1"

// validationRefusals are what a run refused by validation prints.
var validationRefusals = []string{"is not set up", "skewtest: invalid input"}

// fakeKopsScript is a fake kops, not kops: it records each call (its
// arguments, and the environment the provider must give kops) in the log
// file, answers `kops version` as the user's kops 1.37 did, and fails any
// other call as kops does when the S3 state store refuses connections.
const fakeKopsScript = `#!/bin/sh
# FAKE kops written by skewtest's validate_providers_test.go.
printf '%s\tKOPS_STATE_STORE=%s KOPS_RUN_TOO_NEW_VERSION=%s\n' "$*" "$KOPS_STATE_STORE" "$KOPS_RUN_TOO_NEW_VERSION" >> LOG
case "$1" in
version)
	echo "Client version: 1.37.0 (git-v1.37.0)"
	exit 0
	;;
esac
echo "Error: error reading cluster configuration: RequestError: send request failed" >&2
echo "caused by: dial tcp ADDR: connect: connection refused" >&2
exit 1
`

// writeFakeKops writes the fake kops into a directory of its own, for
// PATH, and returns that directory and its call log.
func writeFakeKops(t *testing.T) (dir, log string) {
	t.Helper()
	dir = t.TempDir()
	log = filepath.Join(t.TempDir(), "fake-kops-calls.log")
	script := strings.NewReplacer("LOG", log, "ADDR", refusedAddr).Replace(fakeKopsScript)
	if err := os.WriteFile(filepath.Join(dir, "kops"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, log
}

// fakeSSHKey writes a fresh ed25519 key pair (key and key.pub) and
// returns the private key's path.
func fakeSSHKey(t *testing.T) string {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "fake key of validate_providers_test.go")
	if err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(key, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key+".pub", ssh.MarshalAuthorizedKey(sshPub), 0o644); err != nil {
		t.Fatal(err)
	}
	return key
}

// emptyKnownHosts is an SSH known_hosts file without entries: no node is
// reached anyway.
func emptyKnownHosts(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// refusingKubeconfig is a kubeconfig whose API server is refusedAddr.
func refusingKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters:
- name: refused
  cluster: {server: "https://`+refusedAddr+`", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: fake}
contexts:
- name: refused
  context: {cluster: refused, user: u}
current-context: refused
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// awsEnv is a valid kops provider set-up on a fake AWS: a region, static
// credentials that are not AWS's, a state store, the admin CIDR (else the
// run asks checkip.amazonaws.com), no shared config files, and every AWS
// endpoint at refusedAddr (the SDK retries a refused connection twice,
// within a second).
func awsEnv(t *testing.T) []string {
	home := t.TempDir()
	return []string{
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=AKIAFAKEFAKEFAKEFAKE",
		"AWS_SECRET_ACCESS_KEY=fake-secret-of-validate-providers-test",
		"AWS_CONFIG_FILE=" + filepath.Join(home, "no-aws-config"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(home, "no-aws-credentials"),
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_ENDPOINT_URL=http://" + refusedAddr,
		"KOPS_STATE_STORE=s3://skewtest-fake-state-store",
		"KOPS_ADMIN_ACCESS=203.0.113.7/32",
	}
}

type providerRun struct {
	code           int
	stdout, stderr string
	took           time.Duration
	artifacts      string
}

// runSkewtest runs the built skewtest with args in an environment of only
// PATH (pathDirs first), HOME, ARTIFACTS and SKEWTEST_CACHE (fresh
// temporary paths) and env, so that nothing the developer's shell sets
// (AWS_PROFILE, KUBECONFIG, a real kops) reaches it. At runDeadline it is
// interrupted, and the test fails.
func runSkewtest(t *testing.T, pathDirs []string, env []string, args ...string) providerRun {
	t.Helper()
	bin := skewtestBinary(t)
	base := t.TempDir()
	r := providerRun{artifacts: filepath.Join(base, "artifacts")}
	path := strings.Join(append(pathDirs, os.Getenv("PATH")), string(os.PathListSeparator))
	cmdEnv := append([]string{"PATH=" + path, "HOME=" + filepath.Join(base, "home"),
		"ARTIFACTS=" + r.artifacts, "SKEWTEST_CACHE=" + filepath.Join(base, "cache")}, env...)

	if slices.Contains(env, "PROVIDER=kops") {
		t.Cleanup(func() { cleanKopsRunDir(t, r.artifacts) })
	}

	ctx, cancel := context.WithTimeout(t.Context(), runDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	cmd.Env = cmdEnv
	cmd.Dir = base
	start := time.Now()
	r.stdout, r.stderr, r.code = runCaptured(t, cmd)
	r.took = time.Since(start)
	t.Logf("%s skewtest %s: exit %d after %s\nstdout:\n%s\nstderr:\n%s", strings.Join(env, " "), strings.Join(args, " "), r.code, r.took.Round(time.Millisecond), r.stdout, r.stderr)
	if ctx.Err() != nil {
		t.Fatalf("skewtest %s was still running after %s and was interrupted; it should fail at once on %s", strings.Join(args, " "), runDeadline, refusedAddr)
	}
	return r
}

// assertPastValidation fails the test if the run was refused by
// validation.
func assertPastValidation(t *testing.T, r providerRun) {
	t.Helper()
	for _, w := range validationRefusals {
		if strings.Contains(r.stderr, w) {
			t.Errorf("the run was refused by validation (stderr says %q), but its settings are valid:\n%s", w, r.stderr)
		}
	}
	if r.code == 2 {
		t.Errorf("exit code 2 (invalid input), but the settings are valid; stderr:\n%s", r.stderr)
	}
}

// assertRefusedEndpoint checks that the run, past validation, failed on
// the refused endpoint as an infrastructure failure (exit 3), saying what.
func assertRefusedEndpoint(t *testing.T, r providerRun, says ...string) {
	t.Helper()
	if r.code != 3 {
		t.Errorf("exit code %d, want 3 (infrastructure: %s refuses); stderr:\n%s", r.code, refusedAddr, r.stderr)
	}
	for _, w := range says {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr does not say %q:\n%s", w, r.stderr)
		}
	}
}

// checkRefused makes sure refusedAddr refuses connections, as the cases
// assume.
func checkRefused(t *testing.T) {
	t.Helper()
	c, err := net.DialTimeout("tcp", refusedAddr, 5*time.Second)
	if err == nil {
		c.Close()
		t.Fatalf("something listens on %s; the test needs a port that refuses", refusedAddr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v, want connection refused", refusedAddr, err)
	}
}

// The user's path: kops on PATH, a region, credentials and a state store.
// The run gets past validation, brings the cluster up as far as kops
// create cluster, which fails on the refused state store, tears down (the
// sweep fails on the refused EC2 endpoint) and exits 3.
func TestKopsRunGetsPastValidation(t *testing.T) {
	t.Parallel()
	checkRefused(t)
	fakeDir, calls := writeFakeKops(t)
	env := append(awsEnv(t), "PROVIDER=kops", "PLAN=v1.37.2,v1.36.3",
		"KUBELETS=file:"+binariestest.FakeKubelet(t, "v1.37.2")+",file:"+binariestest.FakeKubelet(t, "v1.36.3"))
	r := runSkewtest(t, []string{fakeDir}, env, "run")
	if strings.Contains(r.stderr, "another skewtest run is using this host") && !strings.Contains(r.stderr, "is not set up") {
		// A kops run takes the host lock after validation, and stops
		// there (exit 2) while another run holds it.
		t.Skipf("past validation, but another skewtest run holds the host lock, so the run stopped there")
	}
	assertPastValidation(t, r)
	assertRefusedEndpoint(t, r, "bring up the kops cluster", "kops: create cluster", "connection refused")

	b, err := os.ReadFile(calls)
	if err != nil {
		t.Fatalf("the fake kops was never called: %v", err)
	}
	log := string(b)
	t.Logf("fake kops calls:\n%s", log)
	var verbs []string
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		args, env, _ := strings.Cut(line, "\t")
		f := strings.Fields(args)
		verbs = append(verbs, strings.Join(f[:min(2, len(f))], " "))
		if f[0] != "version" && env != "KOPS_STATE_STORE=s3://skewtest-fake-state-store KOPS_RUN_TOO_NEW_VERSION=1" {
			t.Errorf("kops %s ran with %s, want the run's state store and KOPS_RUN_TOO_NEW_VERSION=1", args, env)
		}
		if f[0] == "create" {
			for _, w := range []string{"--kubernetes-version v1.37.2", "--zones us-east-1a", "--admin-access 203.0.113.7/32", "--name skewtest-"} {
				if !strings.Contains(args, w) {
					t.Errorf("kops create cluster without %q: %s", w, args)
				}
			}
		}
	}
	// Validation asked kops's version; Up asked for a leftover cluster,
	// then created; Down asked again and found none to delete.
	if got, want := strings.Join(verbs, ", "), "version --short, get cluster, create cluster, get cluster"; got != want {
		t.Errorf("fake kops calls: %s, want %s", got, want)
	}
}

// cleanKopsRunDir removes the run directory a kops run kept because its
// sweep could not reach EC2: under HOME (a temporary directory) for
// non-root, else under the run root, found by the run's ID, which names
// its artifacts directory.
func cleanKopsRunDir(t *testing.T, artifacts string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	kops, err := clusters.Lookup("kops")
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(artifacts)
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(kops.RunRoot(""), kops.RunDirPrefix+e.Name())
		if _, err := os.Stat(dir); err == nil {
			t.Logf("removing the run directory the failed run kept: %s", dir)
			if err := os.RemoveAll(dir); err != nil {
				t.Error(err)
			}
		}
	}
}

// Every provider's matrix tour gets past validation, with the plain run's
// provider settings, and stops when the release mirror refuses: nothing
// is made. kops's used to be checked without its settings.
func TestMatrixGetsPastValidation(t *testing.T) {
	t.Parallel()
	checkRefused(t)
	fakeDir, _ := writeFakeKops(t)
	release := []string{"MATRIX=v1.36.3,v1.37.2", "MATRIX_NODES=1", "KUBELET_SOURCE=release", "RELEASE_BASE_URL=http://" + refusedAddr}
	for _, tc := range []struct {
		provider string
		env      []string
	}{
		{"local", nil},
		{"kind", nil},
		{"existing", []string{"KUBECONFIG=" + refusingKubeconfig(t), "SSH_KEY=" + fakeSSHKey(t), "SSH_KNOWN_HOSTS=" + emptyKnownHosts(t), "STORAGE_CLASS=standard"}},
		{"kops", awsEnv(t)},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			t.Parallel()
			env := append(append([]string{"PROVIDER=" + tc.provider}, release...), tc.env...)
			r := runSkewtest(t, []string{fakeDir}, env, "matrix")
			assertPastValidation(t, r)
			assertRefusedEndpoint(t, r, "resolve kubelets", refusedAddr)
		})
	}
}

// The plain run of the other providers gets past validation too: existing
// as far as its refused API server; local and kind, which would make a
// cluster on this host, as far as the refused release mirror.
func TestRunGetsPastValidation(t *testing.T) {
	t.Parallel()
	checkRefused(t)
	release := []string{"PLAN=v1.37.2,v1.36.3", "KUBELET_SOURCE=release", "RELEASE_BASE_URL=http://" + refusedAddr}
	t.Run("existing", func(t *testing.T) {
		t.Parallel()
		env := []string{"PROVIDER=existing", "KUBECONFIG=" + refusingKubeconfig(t), "SSH_KEY=" + fakeSSHKey(t), "SSH_KNOWN_HOSTS=" + emptyKnownHosts(t), "STORAGE_CLASS=standard",
			"PLAN=v1.37.2,v1.36.3", "KUBELETS=file:" + binariestest.FakeKubelet(t, "v1.37.2") + ",file:" + binariestest.FakeKubelet(t, "v1.36.3")}
		r := runSkewtest(t, nil, env, "run")
		assertPastValidation(t, r)
		assertRefusedEndpoint(t, r, "bring up the existing cluster", refusedAddr)
	})
	for _, p := range []string{"local", "kind"} {
		t.Run(p, func(t *testing.T) {
			t.Parallel()
			r := runSkewtest(t, nil, append([]string{"PROVIDER=" + p}, release...), "run")
			assertPastValidation(t, r)
			assertRefusedEndpoint(t, r, "resolve kubelets", refusedAddr)
		})
	}
}
