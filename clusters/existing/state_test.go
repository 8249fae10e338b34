package existing

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"sigs.k8s.io/skewtest/clusters/existing/internal/sshdtest"
	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/clusters/workloads"
)

// Two clusters a kubeconfig reaches: context "run" (the run's) and
// "other", each its own API server and CA.
const (
	runServer   = "https://127.0.0.1:1"
	otherServer = "https://127.0.0.1:2"
)

// writeKubeconfig writes a kubeconfig with contexts "run" and "other",
// current, and "run" reaching server.
func writeKubeconfig(t *testing.T, path, current, server string) {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["run"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: []byte("CA of the run's cluster")}
	kc.Clusters["other"] = &clientcmdapi.Cluster{Server: otherServer, CertificateAuthorityData: []byte("CA of another cluster")}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "dummy"}
	for _, c := range []string{"run", "other"} {
		kc.Contexts[c] = &clientcmdapi.Context{Cluster: c, AuthInfo: "u"}
	}
	kc.CurrentContext = current
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
}

// stateProvider is a provider with a state directory on a kubeconfig of
// writeKubeconfig, current context "run"; it never reaches a node.
func stateProvider(t *testing.T, context string) (*provider, Config) {
	t.Helper()
	dir := t.TempDir()
	key, kh := filepath.Join(dir, "id"), filepath.Join(dir, "known_hosts")
	if _, _, err := sshdtest.WriteKey(key); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kh, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Kubeconfig: filepath.Join(dir, "kubeconfig"), Context: context, RunID: "run-1", StateDir: filepath.Join(dir, "state"),
		SSH: SSHConfig{KeyFile: key, KnownHostsFile: kh}}
	writeKubeconfig(t, cfg.Kubeconfig, "run", runServer)
	// Up makes the state directory; these tests go no further than the
	// state.
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	p, err := newProvider(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p, cfg
}

// A batch's jobs and a matrix's trails each record their workload: the
// state keeps one record per namespace, drops each once it is gone, and
// lives until the last is.
func TestStateKeepsOneRecordPerWorkload(t *testing.T) {
	p, cfg := stateProvider(t, "")
	rec := func(ns string) workloads.Record {
		return workloads.Record{Run: "run-1", Namespace: ns, OwnsNamespace: true, StatefulSet: "web",
			Volumes: storage.Volumes{PVs: []storage.PV{{Name: "pv-" + ns, Claim: "data-web-0"}}}}
	}
	namespaces := func() []string {
		t.Helper()
		st, err := readState(cfg.StateDir)
		if err != nil {
			t.Fatalf("the state: %v", err)
		}
		var out []string
		for _, w := range st.Workloads {
			out = append(out, w.Namespace)
		}
		return out
	}
	for _, ns := range []string{"job-1", "job-2", "job-3"} {
		if err := p.RecordWorkload(rec(ns)); err != nil {
			t.Fatal(err)
		}
	}
	// A record written again (its UIDs now known) replaces its own.
	again := rec("job-2")
	again.NamespaceUID = "uid-2"
	if err := p.RecordWorkload(again); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(namespaces(), ","); got != "job-1,job-3,job-2" {
		t.Fatalf("recorded workloads %s, want job-1,job-3,job-2", got)
	}
	for i, ns := range []string{"job-1", "job-2"} {
		if err := p.RecordWorkload(workloads.Record{Run: "run-1", Namespace: ns}); err != nil {
			t.Fatal(err)
		}
		if got := namespaces(); len(got) != 2-i || strings.Contains(strings.Join(got, ","), ns) {
			t.Fatalf("after %s is gone the state records %v", ns, got)
		}
	}
	if err := p.RecordWorkload(workloads.Record{Run: "run-1", Namespace: "job-3"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cfg.StateDir); !os.IsNotExist(err) {
		t.Errorf("the state directory once every workload is gone: %v", err)
	}
}

// clean acts on the run's cluster or not at all: once the kubeconfig
// reaches another (its current context switched, or the run's context
// pointed elsewhere), it refuses, naming both, and keeps the state.
func TestCleanRefusesAnotherCluster(t *testing.T) {
	for _, tc := range []struct {
		name, context    string
		current, reaches string
	}{
		{"current context switched", "", "other", runServer},
		{"the run's context points elsewhere", "run", "run", otherServer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, cfg := stateProvider(t, tc.context)
			if err := p.RecordWorkload(workloads.Record{Run: "run-1", Namespace: "skewtest-run-1", OwnsNamespace: true}); err != nil {
				t.Fatal(err)
			}
			writeKubeconfig(t, cfg.Kubeconfig, tc.current, tc.reaches)
			// A clean that did not refuse would try the removal against
			// an API server that is not there: the bound keeps that short.
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			err := cleanRunDir(ctx, cfg.StateDir)
			if !errors.Is(err, workloads.ErrOtherCluster) {
				t.Fatalf("Clean = %v, want ErrOtherCluster", err)
			}
			for _, w := range []string{runServer, otherServer, cfg.Kubeconfig, "use-context run"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the refusal %q does not name %q", err, w)
				}
			}
			st, rerr := readState(cfg.StateDir)
			if rerr != nil || len(st.Workloads) != 1 {
				t.Errorf("the state after the refusal: %+v, %v; want it kept", st, rerr)
			}
		})
	}
}

// A state an older skewtest left names its workload by fixed names alone
// (namespace skewtest, which may be another run's or the owner's): clean
// removes nothing in the cluster and says what it left.
func TestCleanLeavesAnOlderRecordOfFixedNames(t *testing.T) {
	_, cfg := stateProvider(t, "")
	older := `{"runID":"run-0","kubeconfig":"` + cfg.Kubeconfig + `","ssh":{},"nodes":[],"workload":{"namespace":"skewtest","madeNamespace":true,"statefulSet":"web"}}`
	if err := os.WriteFile(filepath.Join(cfg.StateDir, StateFile), []byte(older), 0o600); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&log, nil)))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := cleanRunDir(ctx, cfg.StateDir); err != nil {
		t.Fatalf("Clean: %v", err)
	}
	if !strings.Contains(log.String(), "left alone") || !strings.Contains(log.String(), `\"namespace\":\"skewtest\"`) {
		t.Errorf("clean did not say what it left:\n%s", log.String())
	}
	if _, err := os.Stat(cfg.StateDir); !os.IsNotExist(err) {
		t.Errorf("the state directory after clean: %v", err)
	}
}
