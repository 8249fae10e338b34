package skewrun

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/clusters/binaries/binariestest"
	"sigs.k8s.io/skewtest/internal/testgate"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
)

// runDirs are the places a run may create things in, all under one
// t.TempDir() and none existing beforehand, so that any file or directory
// the run leaves behind shows.
type runDirs struct {
	artifacts, runRoot, cache string
}

func newRunDirs(t *testing.T) runDirs {
	t.Helper()
	base := t.TempDir()
	return runDirs{
		artifacts: filepath.Join(base, "artifacts"),
		runRoot:   filepath.Join(base, "runs"),
		cache:     filepath.Join(base, "cache"),
	}
}

// assertNothingCreated fails unless every directory is missing or empty.
func (d runDirs) assertNothingCreated(t *testing.T) {
	t.Helper()
	for _, dir := range []struct{ name, path string }{
		{"ArtifactsDir", d.artifacts},
		{"RunRoot", d.runRoot},
		{"CacheDir", d.cache},
	} {
		entries, err := os.ReadDir(dir.path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Errorf("%s %s: %v", dir.name, dir.path, err)
			continue
		}
		if len(entries) > 0 {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("a failed run left %s in %s (%s); it must create nothing before its input is valid", strings.Join(names, ", "), dir.name, dir.path)
		}
	}
}

func TestRunRejectsBadInputBeforeCreatingAnything(t *testing.T) {
	t.Parallel()
	// Every case either fails validation before binaries are resolved or
	// resolves only file: sources. Cases that must fail before resolution
	// still get file: sources that do not exist where the plan allows it,
	// so that a regression moving a check after resolution fails the test
	// on the message instead of building or downloading Kubernetes.
	missing := "file:/does/not/exist"
	missing2 := "file:/also/missing"
	v1363 := binariestest.FakeKubelet(t, "v1.36.3")

	for _, tc := range []struct {
		name string
		opts Options
		// invalid says the error must wrap exitcode.ErrInvalid (exit 2).
		invalid bool
		want    []string
	}{
		{
			name:    "plan not a version",
			opts:    Options{Plan: "banana", Kubelets: []string{missing}},
			invalid: true,
			want:    []string{"PLAN=banana", `"banana" is not a version`, "want vMAJOR.MINOR.PATCH such as v1.36.3"},
		},
		{
			name:    "plan with an empty entry",
			opts:    Options{Plan: "v1.37.2,,v1.36.3", Kubelets: []string{missing, missing2, missing}},
			invalid: true,
			want:    []string{"PLAN=v1.37.2,,v1.36.3", "plan entry 2", "is empty", "remove the extra comma"},
		},
		{
			name:    "plan outside the skew policy",
			opts:    Options{Plan: "v1.37.2,v1.30.0", Kubelets: []string{missing, missing2}},
			invalid: true,
			want:    []string{"PLAN=v1.37.2,v1.30.0", "plan entry 2 v1.30.0", "outside the version skew policy", "use v1.34.x or newer, or an older API server (APISERVER)", "version-skew-policy"},
		},
		{
			name:    "API server older than the plan",
			opts:    Options{Plan: "v1.37.2,v1.36.3", APIServer: "v1.36.3", Kubelets: []string{missing, missing2}},
			invalid: true,
			want:    []string{"PLAN=v1.37.2,v1.36.3 under APISERVER=v1.36.3", "plan entry 1 v1.37.2 is newer than the API server (v1.36.3)"},
		},
		{
			name:    "API server too new for the plan",
			opts:    Options{Plan: "v1.28.5,v1.26.15", APIServer: "v1.32.13", Kubelets: []string{missing, missing2}},
			invalid: true,
			want:    []string{"under APISERVER=v1.32.13", "plan entry 2 v1.26.15 is outside the version skew policy", "oldest allowed is v1.29"},
		},
		{
			name:    "API server not a version",
			opts:    Options{Plan: "v1.37.2,v1.36.3", APIServer: "latest", Kubelets: []string{missing, missing2}},
			invalid: true,
			want:    []string{"APISERVER=latest: not a release version", "such as v1.28.15"},
		},
		{
			name:    "API server of a cluster skewtest does not create",
			opts:    Options{Provider: "existing", Plan: "v1.37.2,v1.36.3", APIServer: "v1.37.2", Kubelets: []string{missing, missing2}},
			invalid: true,
			want:    []string{"APISERVER=v1.37.2: PROVIDER=existing attaches to a cluster", "unset APISERVER"},
		},
		{
			name:    "plan mixing major versions",
			opts:    Options{Plan: "v1.37.2,v2.0.0", Kubelets: []string{missing, missing2}},
			invalid: true,
			want:    []string{"PLAN=v1.37.2,v2.0.0", "plan entry 1 v1.37.2", "major version", "use v2.x versions"},
		},
		{
			name:    "plan of a single version",
			opts:    Options{Plan: "v1.37.2", Kubelets: []string{missing}},
			invalid: true,
			want:    []string{"PLAN=v1.37.2", "at least two versions", `got "v1.37.2"`},
		},
		{
			name:    "unknown scenario",
			opts:    Options{Scenario: "nope", Plan: "v1.37.2,v1.36.3", Kubelets: []string{missing, missing2}},
			invalid: true,
			want:    []string{"SCENARIO=nope", `no catalogue fault "nope"`, "implemented: "},
		},
		{
			name:    "block shape with the tmpfs driver",
			opts:    Options{Scenario: "subpath,block", CSIMode: "tmpfs", Plan: "v1.37.2,v1.36.3", Kubelets: []string{missing, missing2}},
			invalid: true,
			want:    []string{"SCENARIO=subpath,block", "shape block needs raw block volumes", "CSI_MODE=ebs, not CSI_MODE=tmpfs"},
		},
		{
			name:    "a fault among shapes",
			opts:    Options{Scenario: "subpath,reboot", Plan: "v1.37.2,v1.36.3", Kubelets: []string{missing, missing2}},
			invalid: true,
			want:    []string{"SCENARIO=subpath,reboot", `no catalogue shape "reboot"`},
		},
		{
			name:    "shapes on a provider they do not run on",
			opts:    Options{Scenario: "emptydir-memory,block", Provider: "kind", Plan: "v1.37.2,v1.36.3", Kubelets: []string{missing, missing2}},
			invalid: true,
			want:    []string{"shape block runs on local, not PROVIDER=kind"},
		},
		{
			name:    "scenario on a provider it does not run on",
			opts:    Options{Scenario: "kill-during-publish", Provider: "kind", Plan: "v1.37.2,v1.36.3", Kubelets: []string{missing, missing2}},
			invalid: true,
			want:    []string{"SCENARIO=kill-during-publish runs on local, not PROVIDER=kind"},
		},
		{
			name:    "unknown provider",
			opts:    Options{Provider: "nope", Plan: "v1.37.2,v1.36.3", Kubelets: []string{missing, missing2}},
			invalid: true,
			want:    []string{"PROVIDER=nope", `unknown provider "nope"`, "want one of local, kind, existing, kops"},
		},
		{
			name:    "kops without AWS set-up",
			opts:    Options{Provider: "kops", Plan: "v1.37.2,v1.36.3", Kubelets: []string{missing, missing2}},
			invalid: true,
			want:    []string{"PROVIDER=kops", "no AWS region: set AWS_REGION", "no kops: not found in PATH", "no AWS credentials"},
		},
		{
			name:    "unknown kind CSI driver",
			opts:    Options{Provider: "kind", ProviderSettings: providerSettings(t, "kind", map[string]string{"KIND_CSI": "nfs"}), Plan: "v1.37.2,v1.36.3", Kubelets: []string{missing, missing2}},
			invalid: true,
			want:    []string{"PROVIDER=kind", `KIND_CSI="nfs"`, "want skewtest", "or hostpath"},
		},
		{
			name:    "unknown volume kind",
			opts:    Options{VolumeKind: "nfs", Plan: "v1.37.2,v1.36.3", Kubelets: []string{missing, missing2}},
			invalid: true,
			want:    []string{"VOLUME_KIND", `unknown volume kind "nfs"`, `want "csi" or "local"`},
		},
		{
			name:    "unknown kubelet source",
			opts:    Options{KubeletSource: "ftp", Plan: "v1.37.2,v1.36.3"},
			invalid: true,
			want:    []string{`KUBELET_SOURCE="ftp"`, "want module", "release (download", "or kindest"},
		},
		{
			name:    "too few kubelets for the plan",
			opts:    Options{Plan: "v1.37.2,v1.36.3,v1.37.2", Kubelets: []string{missing, missing2}},
			invalid: true,
			want:    []string{"KUBELETS has 2 entries for a plan of 3 versions", "give one per plan entry"},
		},
		{
			name:    "too many kubelets for the plan",
			opts:    Options{Plan: "v1.37.2,v1.36.3", Kubelets: []string{missing, missing2, missing}},
			invalid: true,
			want:    []string{"KUBELETS has 3 entries for a plan of 2 versions", "give one per plan entry"},
		},
		{
			// A missing file is found when the binaries are resolved; it is
			// still bad input (exit 2), and the message names the path and
			// a way out.
			name:    "missing kubelet binaries",
			opts:    Options{Plan: "v1.37.2,v1.36.3", Kubelets: []string{missing, missing2}},
			invalid: true,
			want:    []string{"plan entry 1 (file:/does/not/exist)", "kubelet binary file:/does/not/exist does not exist", "make WHAT=cmd/kubelet", "checkout:", "module:vX.Y.Z"},
		},
		{
			name: "kubelet binary not executable",
			opts: Options{Plan: "v1.37.2,v1.36.3", Kubelets: func() []string {
				p := filepath.Join(t.TempDir(), "kubelet")
				if err := os.WriteFile(p, []byte("not a program"), 0o644); err != nil {
					t.Fatal(err)
				}
				return []string{"file:" + p, "file:" + p}
			}()},
			invalid: true,
			want:    []string{"is not executable", "chmod +x"},
		},
		{
			name:    "kubelet binary of the wrong version",
			opts:    Options{Plan: "v1.37.2,v1.36.3", Kubelets: []string{"file:" + v1363, "file:" + v1363}},
			invalid: true,
			want:    []string{"plan entry 1 wants kubelet v1.37.2", "file:" + v1363, "is v1.36.3"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dirs := newRunDirs(t)
			o := tc.opts
			o.ArtifactsDir, o.RunRoot, o.CacheDir = dirs.artifacts, dirs.runRoot, dirs.cache
			o.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
			o.Out = t.Output()
			// Belt and braces: should a case ever get past validation into
			// a build, download or bring-up, it is cut short.
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()

			res, err := Run(ctx, o)
			if err == nil {
				t.Fatalf("Run succeeded with bad input; result %+v", res)
			}
			t.Logf("Run: %v", err)
			if res != nil {
				t.Errorf("Run returned a result (%+v) for a run that never started", res)
			}
			if ctx.Err() != nil {
				t.Errorf("Run ran until the test's deadline (%v): it should have failed at once", ctx.Err())
			}
			if got := errors.Is(err, exitcode.ErrInvalid); got != tc.invalid {
				t.Errorf("errors.Is(err, ErrInvalid) = %v, want %v; err: %v", got, tc.invalid, err)
			}
			if code := exitcode.Of(err); tc.invalid && code != exitcode.Invalid {
				t.Errorf("ExitCode = %d, want %d (bad input)", code, exitcode.Invalid)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
			dirs.assertNothingCreated(t)
		})
	}
}

func mapEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// providerSettings are the named provider's own settings as its
// descriptor reads them from env.
func providerSettings(t *testing.T, provider string, env map[string]string) any {
	t.Helper()
	d, err := clusters.Lookup(provider)
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.FromEnv(mapEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestOptionsFromEnvRejectsBadValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, value string
		want        []string
	}{
		{"REPLICAS", "0", []string{`REPLICAS="0"`, "want a number from 1 to 50"}},
		{"REPLICAS", "51", []string{`REPLICAS="51"`, "want a number from 1 to 50"}},
		{"REPLICAS", "-3", []string{`REPLICAS="-3"`, "want a number from 1 to 50"}},
		{"REPLICAS", "abc", []string{`REPLICAS="abc"`, "want a number from 1 to 50"}},
		{"KEEP_CLUSTER_ON_FAILURE", "maybe", []string{`KEEP_CLUSTER_ON_FAILURE="maybe"`, "want true or false"}},
		{"BATCH_NODES", "0", []string{`BATCH_NODES="0"`, "want a number from 1 to 16"}},
		{"BATCH_NODES", "17", []string{`BATCH_NODES="17"`, "want a number from 1 to 16"}},
		{"POLL_INTERVAL", "fast", []string{`POLL_INTERVAL="fast"`, "want a duration such as 250ms or 3m"}},
		{"POLL_INTERVAL", "0s", []string{`POLL_INTERVAL="0s"`, "want a duration"}},
		{"POLL_INTERVAL", "250", []string{`POLL_INTERVAL="250"`, "want a duration"}},
		{"CLEANUP_TIMEOUT", "-1m", []string{`CLEANUP_TIMEOUT="-1m"`, "want a duration"}},
		{"SKEWTEST_TIMEOUT_FACTOR", "0", []string{`SKEWTEST_TIMEOUT_FACTOR="0"`, "from 1 to 100"}},
		{"SSH_ADDRESSES", "node-a", []string{`SSH_ADDRESSES="node-a"`, "want NODE=HOST:PORT"}},
		{"SSH_ADDRESSES", "node-a=10.0.0.1", []string{`"node-a=10.0.0.1"`, "want NODE=HOST:PORT"}},
		{"SSH_ADDRESSES", "=10.0.0.1:22", []string{"want NODE=HOST:PORT"}},
	} {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			t.Parallel()
			_, err := OptionsFromEnv(mapEnv(map[string]string{tc.name: tc.value}))
			if err == nil {
				t.Fatalf("OptionsFromEnv accepted %s=%s", tc.name, tc.value)
			}
			if !errors.Is(err, exitcode.ErrInvalid) {
				t.Errorf("error is not ErrInvalid (the CLI would exit 1, not 2): %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q: %v", w, err)
				}
			}
		})
	}
}

func TestOptionsFromEnvParsesGoodValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		env   map[string]string
		check func(t *testing.T, o Options)
	}{
		{"nothing set leaves defaults to Run", nil, func(t *testing.T, o Options) {
			if o.Provider != "" || o.Plan != "" || o.Replicas != 0 || o.KeepClusterOnFailure || o.PollInterval != 0 || o.CleanupTimeout != 0 || o.Kubelets != nil {
				t.Errorf("empty environment gave non-zero options: %+v", o)
			}
		}},
		{"strings are passed through", map[string]string{
			"PROVIDER": "existing", "PLAN": "v1.37.2,v1.36.3", "VOLUME_KIND": "local", "KUBELET_SOURCE": "release",
			"RELEASE_BASE_URL": "https://mirror.example", "ARTIFACTS": "/tmp/a", "SKEWTEST_CACHE": "/tmp/c",
		}, func(t *testing.T, o Options) {
			for _, f := range []struct{ name, got, want string }{
				{"Provider", o.Provider, "existing"}, {"Plan", o.Plan, "v1.37.2,v1.36.3"}, {"VolumeKind", o.VolumeKind, "local"},
				{"KubeletSource", o.KubeletSource, "release"}, {"ReleaseBaseURL", o.ReleaseBaseURL, "https://mirror.example"},
				{"ArtifactsDir", o.ArtifactsDir, "/tmp/a"}, {"CacheDir", o.CacheDir, "/tmp/c"},
			} {
				if f.got != f.want {
					t.Errorf("%s = %q, want %q", f.name, f.got, f.want)
				}
			}
		}},
		{"numbers, booleans and durations", map[string]string{
			"REPLICAS": "5", "KEEP_CLUSTER_ON_FAILURE": "true", "POLL_INTERVAL": "100ms", "CLEANUP_TIMEOUT": "2m",
		}, func(t *testing.T, o Options) {
			if o.Replicas != 5 || !o.KeepClusterOnFailure || o.PollInterval != 100*time.Millisecond || o.CleanupTimeout != 2*time.Minute {
				t.Errorf("got Replicas=%d KeepClusterOnFailure=%v PollInterval=%v CleanupTimeout=%v, want 5 true 100ms 2m",
					o.Replicas, o.KeepClusterOnFailure, o.PollInterval, o.CleanupTimeout)
			}
		}},
		{"timeout factor", map[string]string{"SKEWTEST_TIMEOUT_FACTOR": "10"}, func(t *testing.T, o Options) {
			if o.TimeoutFactor != 10 {
				t.Errorf("TimeoutFactor = %d, want 10", o.TimeoutFactor)
			}
		}},
		{"replica bounds", map[string]string{"REPLICAS": "50", "KEEP_CLUSTER_ON_FAILURE": "0"}, func(t *testing.T, o Options) {
			if o.Replicas != 50 || o.KeepClusterOnFailure {
				t.Errorf("got Replicas=%d KeepClusterOnFailure=%v, want 50 false", o.Replicas, o.KeepClusterOnFailure)
			}
		}},
		{"lists are split and trimmed", map[string]string{
			"KUBELETS": " file:/a/kubelet , v1.36.3,,",
		}, func(t *testing.T, o Options) {
			if got := strings.Join(o.Kubelets, "|"); got != "file:/a/kubelet|v1.36.3" {
				t.Errorf("Kubelets = %q, want [file:/a/kubelet v1.36.3]", o.Kubelets)
			}
		}},
		{"the chosen provider's own settings travel as its descriptor reads them", map[string]string{
			"PROVIDER": "existing", "KUBECONFIG": "/k/config", "NODES": "node-a, node-b", "SSH_USER": "ops", "KOPS_ZONES": "us-east-1b",
		}, func(t *testing.T, o Options) {
			want := providerSettings(t, "existing", map[string]string{"KUBECONFIG": "/k/config", "NODES": "node-a, node-b", "SSH_USER": "ops"})
			if !reflect.DeepEqual(o.ProviderSettings, want) {
				t.Errorf("ProviderSettings = %+v, want %+v", o.ProviderSettings, want)
			}
		}},
		{"no PROVIDER: the default provider's settings", nil, func(t *testing.T, o Options) {
			if want := providerSettings(t, "local", nil); !reflect.DeepEqual(o.ProviderSettings, want) {
				t.Errorf("ProviderSettings = %#v, want the local provider's %#v", o.ProviderSettings, want)
			}
		}},
		{"an unknown PROVIDER has none, for Validate to refuse", map[string]string{"PROVIDER": "nope"}, func(t *testing.T, o Options) {
			if o.ProviderSettings != nil {
				t.Errorf("ProviderSettings = %#v, want nil", o.ProviderSettings)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o, err := OptionsFromEnv(mapEnv(tc.env))
			if err != nil {
				t.Fatalf("OptionsFromEnv: %v", err)
			}
			tc.check(t, o)
		})
	}
}

// Every variable OptionsFromEnv reads is documented in AllSettings.
func TestSettingsDocumentEveryVariable(t *testing.T) {
	t.Parallel()
	documented := map[string]bool{}
	for _, s := range AllSettings() {
		for _, n := range strings.Split(s.Name, "/") {
			documented[strings.TrimSpace(n)] = true
		}
		if s.Help == "" {
			t.Errorf("setting %s has no help text", s.Name)
		}
	}
	var read []string
	if _, err := OptionsFromEnv(func(k string) string { read = append(read, k); return "" }); err != nil {
		t.Fatal(err)
	}
	for _, k := range read {
		if !documented[k] {
			t.Errorf("OptionsFromEnv reads %s but Settings does not list it", k)
		}
	}
}

// SCENARIO naming shapes plants them all in one workload; the block shape
// picks the driver's EBS mode when CSI_MODE is unset, and the run is named
// after its shapes.
func TestValidateShapes(t *testing.T) {
	v, err := validate(Options{Scenario: "subpath,block", Plan: "v1.37.2,v1.36.3", Kubelets: []string{"file:/nonexistent/a", "file:/nonexistent/b"}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, sh := range v.Shapes {
		got = append(got, sh.Entry.Name)
	}
	if strings.Join(got, ",") != "block,subpath" {
		t.Errorf("shapes %v, want block,subpath (catalogue order)", got)
	}
	if v.Fault != nil || v.Options.CSIMode != "ebs" {
		t.Errorf("fault %v, CSI mode %q; want no fault and ebs", v.Fault, v.Options.CSIMode)
	}
	if r := v.NewRun(time.Now(), nil); r.CatalogueEntry() != "block,subpath" {
		t.Errorf("run scenario %q", r.Scenario)
	}
	v, err = validate(Options{Scenario: "emptydir-memory", Plan: "v1.37.2,v1.36.3", Kubelets: []string{"file:/nonexistent/a", "file:/nonexistent/b"}})
	if err != nil || len(v.Shapes) != 1 || v.Options.CSIMode != "" {
		t.Errorf("one shape without block: %+v, %v; want the driver's default mode", v, err)
	}
	// A fault on the shapes' workload picks the mode its block shape needs,
	// and refuses another.
	v, err = validate(Options{Scenario: "shapes-restart", Plan: "v1.37.2,v1.36.3", Kubelets: []string{"file:/nonexistent/a", "file:/nonexistent/b"}})
	if err != nil || v.Fault == nil || v.Shapes != nil || v.Options.CSIMode != "ebs" {
		t.Errorf("shapes-restart: %+v, %v; want the fault in the driver's ebs mode", v, err)
	}
	_, err = validate(Options{Scenario: "shapes-restart", CSIMode: "tmpfs", Plan: "v1.37.2,v1.36.3", Kubelets: []string{"file:/nonexistent/a", "file:/nonexistent/b"}})
	if !errors.Is(err, exitcode.ErrInvalid) || !strings.Contains(err.Error(), "CSI_MODE=ebs") {
		t.Errorf("shapes-restart with CSI_MODE=tmpfs: %v; want it refused naming CSI_MODE=ebs", err)
	}
}

// A poll interval or cleanup bound below its floor is refused as bad input
// (exit 2), naming the setting, its value, the floor and why; the floors
// themselves pass.
func TestValidateRefusesWaitsBelowTheirFloors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{"POLL_INTERVAL": "10ms"}, []string{"POLL_INTERVAL=10ms", "floor of 50ms", "mountinfo", "lists the API", "only loads the node under test"}},
		{map[string]string{"POLL_INTERVAL": "49ms"}, []string{"POLL_INTERVAL=49ms", "floor of 50ms"}},
		{map[string]string{"CLEANUP_TIMEOUT": "5s"}, []string{"CLEANUP_TIMEOUT=5s", "floor of 15s", "volume manager reconciler", "pod cleanup", "kubelet regression (exit 1)"}},
		{map[string]string{"CLEANUP_TIMEOUT": "14.9s"}, []string{"CLEANUP_TIMEOUT=14.9s", "floor of 15s"}},
	} {
		t.Run(strings.Join(mapKeys(tc.env), ","), func(t *testing.T) {
			t.Parallel()
			o, err := OptionsFromEnv(mapEnv(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			o.Plan, o.Kubelets = "v1.37.2,v1.36.3", []string{"file:/nonexistent/a", "file:/nonexistent/b"}
			o.ArtifactsDir = filepath.Join(t.TempDir(), "artifacts")
			_, err = validate(o)
			if err == nil {
				t.Fatalf("Validate accepted %v", tc.env)
			}
			if code := exitcode.Of(err); code != exitcode.Invalid {
				t.Errorf("ExitCode = %d, want %d (bad input); err: %v", code, exitcode.Invalid, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q: %v", w, err)
				}
			}
		})
	}
	o := Options{Plan: "v1.37.2,v1.36.3", Kubelets: []string{"file:/nonexistent/a", "file:/nonexistent/b"},
		PollInterval: 50 * time.Millisecond, CleanupTimeout: 15 * time.Second, ArtifactsDir: t.TempDir()}
	if _, err := validate(o); err != nil {
		t.Errorf("Validate refused the floors themselves: %v", err)
	}
}

func mapKeys(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

// ARTIFACTS is tried for writing before anything is made: one that cannot
// be written is refused (exit 2) naming the path; a missing one is
// created, and the probe leaves no file in it.
func TestValidateTriesArtifactsForWriting(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	file := filepath.Join(base, "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"a regular file":                             file,
		"under a regular file":                       filepath.Join(file, "artifacts"),
		"a directory nobody can write into (procfs)": "/proc",
	}
	if os.Geteuid() != 0 {
		// Root writes into a read-only directory regardless.
		ro := filepath.Join(base, "read-only")
		if err := os.Mkdir(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		cases["a read-only directory"] = ro
	}
	for name, dir := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := validate(Options{Plan: "v1.37.2,v1.36.3", Kubelets: []string{"file:/nonexistent/a", "file:/nonexistent/b"}, ArtifactsDir: dir})
			if err == nil {
				t.Fatalf("Validate accepted ARTIFACTS=%s", dir)
			}
			if code := exitcode.Of(err); code != exitcode.Invalid {
				t.Errorf("ExitCode = %d, want %d (bad input); err: %v", code, exitcode.Invalid, err)
			}
			for _, w := range []string{"ARTIFACTS=" + dir, "point ARTIFACTS at a directory you can write"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q: %v", w, err)
				}
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "new", "artifacts")
		v, err := validate(Options{Plan: "v1.37.2,v1.36.3", Kubelets: []string{"file:/nonexistent/a", "file:/nonexistent/b"}, ArtifactsDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if v.ArtifactsRoot != dir {
			t.Errorf("ArtifactsRoot %s, want %s", v.ArtifactsRoot, dir)
		}
		entries, err := os.ReadDir(dir)
		if err != nil || len(entries) != 0 {
			t.Errorf("artifacts root after Validate: %v, %v; want it created and empty", entries, err)
		}
	})
}

// Root runs nothing from a cache another user could write: the run is
// refused as bad input, naming SKEWTEST_CACHE and the fix, before anything
// is made.
func TestValidateRefusesACacheOthersCanWrite(t *testing.T) {
	testgate.RequireRoot(t, "only root's runs check who else can write their cache")
	users := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(users, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(users, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(users, ".cache", "skewtest")
	_, err := validate(Options{Plan: "v1.37.2,v1.36.3", Kubelets: []string{"file:/nonexistent/a", "file:/nonexistent/b"},
		CacheDir: cache, ArtifactsDir: t.TempDir()})
	if code := exitcode.Of(err); code != exitcode.Invalid {
		t.Fatalf("ExitCode = %d, want %d (bad input); err: %v", code, exitcode.Invalid, err)
	}
	for _, w := range []string{"SKEWTEST_CACHE", users + " is owned by uid 65534", "SKEWTEST_CACHE=/var/cache/skewtest"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not say %q: %v", w, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(users, ".cache")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused run made the cache: %v", err)
	}
}

// APISERVER sets the control plane a created cluster runs; without it the
// plan's newest does.
func TestValidateAPIServer(t *testing.T) {
	t.Parallel()
	files := []string{"file:/nonexistent/a", "file:/nonexistent/b", "file:/nonexistent/c"}
	for _, tc := range []struct{ plan, api, want string }{
		{"v1.28.5,v1.26.15,v1.28.5", "v1.28.15", "1.28.15"},
		{"v1.28.5,v1.26.15,v1.28.5", "1.28.15", "1.28.15"},
		{"v1.37.2,v1.36.3,v1.37.2", "", "1.37.2"},
	} {
		v, err := validate(Options{Plan: tc.plan, APIServer: tc.api, Kubelets: files, ArtifactsDir: t.TempDir()})
		if err != nil {
			t.Fatalf("PLAN=%s APISERVER=%s: %v", tc.plan, tc.api, err)
		}
		if v.APIServer == nil || v.APIServer.String() != tc.want {
			t.Errorf("PLAN=%s APISERVER=%s: API server %v, want %s", tc.plan, tc.api, v.APIServer, tc.want)
		}
	}
}

// A plan version whose metrics the table has no fact for is refused
// before anything is built, naming the table to extend.
func TestValidateRefusesAKubeletTheMetricsTableLacks(t *testing.T) {
	t.Parallel()
	files := []string{"file:/nonexistent/a", "file:/nonexistent/b", "file:/nonexistent/c"}
	_, err := validate(Options{Plan: "v1.37.2,v1.37.5,v1.37.2", Kubelets: files, ArtifactsDir: t.TempDir()})
	if exitcode.Of(err) != exitcode.Invalid || !strings.Contains(err.Error(), "v1.37.5") || !strings.Contains(err.Error(), "scenarios/kubeletmetrics/exposed.go") {
		t.Errorf("Validate: %v; want bad input naming v1.37.5 and the table", err)
	}
}

// An artifacts root in a directory others can write (./_artifacts from
// /tmp) is refused unless it is a directory of this user's that only it
// can write: skewtest runs as root, and another user could have planted
// it or a link.
func TestValidateRefusesArtifactsOthersCouldPlant(t *testing.T) {
	t.Parallel()
	files := []string{"file:/nonexistent/a", "file:/nonexistent/b", "file:/nonexistent/c"}
	shared := t.TempDir()
	if err := os.Chmod(shared, 0o1777); err != nil {
		t.Fatal(err)
	}
	validate := func(root string) error {
		_, err := validate(Options{Kubelets: files, ArtifactsDir: root})
		return err
	}
	if err := validate(filepath.Join(shared, "_artifacts")); exitcode.Of(err) != exitcode.Invalid || !strings.Contains(err.Error(), "other users can write") {
		t.Errorf("a new root in a world-writable dir: %v; want bad input", err)
	}
	if _, err := os.Stat(filepath.Join(shared, "_artifacts")); err == nil {
		t.Errorf("the refused root was made")
	}
	link := filepath.Join(shared, "planted")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	if err := validate(link); exitcode.Of(err) != exitcode.Invalid {
		t.Errorf("a planted link: %v; want bad input", err)
	}
	mine := filepath.Join(shared, "mine")
	if err := os.Mkdir(mine, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := validate(mine); err != nil {
		t.Errorf("a directory of mine only I can write: %v", err)
	}
}
