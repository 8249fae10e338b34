package reconstruction

import (
	"context"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/clusters/nodes/nodestest"
	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/plan"
)

// The catalogue says an entry runs exactly when the scenario implements it
// (the baseline shapes run as the sign-off plans).
func TestFaultsMatchTheCatalogue(t *testing.T) {
	faults := Faults()
	for _, e := range Catalogue() {
		_, implemented := faults[e.Name]
		if _, shape := Shapes()[e.Name]; shape {
			implemented = true
		}
		baseline := e.Name == "csi-filesystem" || e.Name == "local-volume"
		if (e.Status == catalogue.Runs) != (implemented || baseline) {
			t.Errorf("catalogue entry %s has status %q; implemented as a fault: %v", e.Name, e.Status, implemented)
		}
	}
	for name, f := range faults {
		if f.Observe == nil {
			t.Errorf("fault %s observes nothing: it could never fail", name)
		}
		if f.Plant == nil && !f.KeepPods && f.Stop == nil {
			t.Errorf("fault %s plants nothing and deletes as the baseline does", name)
		}
	}
	if _, err := LookupFault("block"); err == nil || !strings.Contains(err.Error(), "not implemented as a fault yet") {
		t.Errorf("LookupFault(block) = %v", err)
	}
	if _, err := LookupFault("nope"); err == nil || !strings.Contains(err.Error(), "no catalogue fault") {
		t.Errorf("LookupFault(nope) = %v", err)
	}
}

type fakeCluster struct{}

func (fakeCluster) RESTConfig() (*rest.Config, error) {
	return &rest.Config{Host: "https://127.0.0.1:1"}, nil
}
func (fakeCluster) ProvisionVolumes(context.Context, storage.Request) (storage.Volumes, error) {
	return storage.Volumes{}, nil
}
func (fakeCluster) Workload() storage.Workload { return storage.Workload{} }

// fakeNode runs commands on this host (exec.Local, which outranks Idle's
// nil Cmder); its kubelet lifecycle is nodestest.Idle's.
type fakeNode struct {
	exec.Local
	nodestest.Idle
}

func (fakeNode) String() string { return "node-1" }

// A fault changes each hop's steps: a fault that keeps the pods records
// and compares them instead of deleting and waiting for cleanup; a
// planted fault plants after the delete and before the start; every hop
// ends with the catalogue's judgement.
// A fault that plants shapes needs of a node what those shapes need: it
// runs only where they can.
func TestFaultsNeedWhatTheirShapesNeed(t *testing.T) {
	for name, f := range Faults() {
		for _, shape := range f.Shapes {
			sh, ok := Shapes()[shape]
			if !ok {
				t.Errorf("fault %s plants shape %s, which is not planted", name, shape)
				continue
			}
			if !nodes.HasAll(f.Entry.Needs, sh.Entry.Needs) {
				t.Errorf("fault %s needs %v of a node, but its shape %s needs %v", name, f.Entry.Needs, shape, sh.Entry.Needs)
			}
		}
	}
}

func TestFaultSteps(t *testing.T) {
	names := func(f *Fault) []string { return hop1Steps(t, f) }
	faults := Faults()
	keep, reboot := faults["restart-no-delete"], faults["reboot"]
	between, gate, outage := faults["kill-between-unpublish-unstage"], faults["rejected-feature-gate"], faults["apiserver-unreachable"]
	for _, tc := range []struct {
		fault *Fault
		want  []string
	}{
		{nil, []string{"stop kubelet", "swap kubelet binary to v1.36.3", "force-delete the pods while the kubelet is down", "start kubelet v1.36.3",
			"wait for the node Ready at kubelet v1.36.3", "wait until the old pods' mounts and directories are gone", "re-created pods Running on the same volumes with their data", "kubelet metrics"}},
		{&keep, []string{"stop kubelet", "swap kubelet binary to v1.36.3", "record the running pods' containers and mounts (nothing is deleted)", "start kubelet v1.36.3",
			"wait for the node Ready at kubelet v1.36.3", "the same pods Running, their containers and mounts untouched", "kubelet metrics", "catalogue fault restart-no-delete on kubelet v1.36.3"}},
		{&reboot, []string{"stop kubelet", "swap kubelet binary to v1.36.3", "force-delete the pods while the kubelet is down", "plant fault reboot", "start kubelet v1.36.3",
			"wait for the node Ready at kubelet v1.36.3", "wait until the old pods' mounts and directories are gone", "re-created pods Running on the same volumes with their data", "kubelet metrics", "catalogue fault reboot on kubelet v1.36.3"}},
		// Stop kills in place (the step keeps its name); nothing is
		// deleted while the kubelet is down; a check after the cleanup.
		{&between, []string{"stop kubelet", "swap kubelet binary to v1.36.3", "record the node state the kubelet will find (nothing is deleted)", "start kubelet v1.36.3",
			"wait for the node Ready at kubelet v1.36.3", "wait until the old pods' mounts and directories are gone", "fault kill-between-unpublish-unstage after the cleanup",
			"re-created pods Running on the same volumes with their data", "kubelet metrics", "catalogue fault kill-between-unpublish-unstage on kubelet v1.36.3"}},
		{&gate, []string{"stop kubelet", "swap kubelet binary to v1.36.3", "force-delete the pods while the kubelet is down", "plant fault rejected-feature-gate",
			"start kubelet v1.36.3 with fault rejected-feature-gate", "wait for the node Ready at kubelet v1.36.3", "wait until the old pods' mounts and directories are gone",
			"re-created pods Running on the same volumes with their data", "kubelet metrics", "catalogue fault rejected-feature-gate on kubelet v1.36.3"}},
		{&outage, []string{"stop kubelet", "swap kubelet binary to v1.36.3", "record the running pods' containers and mounts (nothing is deleted)", "plant fault apiserver-unreachable",
			"start kubelet v1.36.3", "fault apiserver-unreachable once the kubelet runs", "wait for the node Ready at kubelet v1.36.3",
			"the same pods Running, their containers and mounts untouched", "kubelet metrics", "catalogue fault apiserver-unreachable on kubelet v1.36.3"}},
	} {
		if got := names(tc.fault); strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("hop 1 steps:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
}

// hop1Steps are the names of the first hop's steps of fault f (nil: the
// baseline) on the default plan, without their "hop 1: " prefix.
func hop1Steps(t *testing.T, f *Fault) []string {
	t.Helper()
	p, err := plan.Parse("v1.37.2,v1.36.3,v1.37.2")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Plan: p, Kubelets: make([]binaries.Binary, 3), Fault: f}, fakeCluster{}, fakeNode{}, &reports.Run{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, st := range s.Steps() {
		if st.Hop == 1 {
			out = append(out, strings.SplitN(st.Name, ": ", 2)[1])
		}
	}
	return out
}

func TestPodUIDOf(t *testing.T) {
	for in, want := range map[string]string{
		"/var/lib/skewtest/r/kubelet/pods/216ec911-8308/volumes/kubernetes.io~csi/pv/mount": "216ec911-8308",
		"/var/lib/skewtest/r/kubelet/plugins/kubernetes.io/csi/d/abc/globalmount":           "",
	} {
		if got := podUIDOf(in); got != want {
			t.Errorf("podUIDOf(%s) = %q, want %q", in, got, want)
		}
	}
}

// The kubelet quotes a volume's name both ways: \"name\" in structured
// lines, "name" in the pending operations' errors.
func TestFindVolumeLine(t *testing.T) {
	log := `I1202 04:41:13.008548 reconciler_common.go:231] "operationExecutor.MountVolume started for volume \"pv-0\" (UniqueName: \"x\")"
E1202 04:41:40.992647 nestedpendingoperations.go:348] Operation failed. Error: MountVolume.SetUp failed for volume "pv-0" (UniqueName: "kubernetes.io/csi/x") : staging path is not mounted
I1202 04:41:41.000000 operation_generator.go:1] "MountVolume.MountDevice succeeded for volume \"pv-1\" (UniqueName: \"y\")"`
	for _, tc := range []struct {
		msg, name string
		want      bool
	}{
		{"MountVolume.SetUp failed for volume", "pv-0", true},
		{"MountVolume.MountDevice succeeded for volume", "pv-0", false},
		{"MountVolume.MountDevice succeeded for volume", "pv-1", true},
		{"MountVolume.SetUp failed for volume", "pv-", false},
	} {
		if got := findVolumeLine(log, tc.msg, tc.name) != ""; got != tc.want {
			t.Errorf("findVolumeLine(%q, %q) found = %v, want %v", tc.msg, tc.name, got, tc.want)
		}
	}
}

// The reboot's re-created pods may stay down only on a hop whose kubelet
// the catalogue expects to have #117513: the old reconstruction, by
// default before 1.28 or with the gate off on 1.28 and 1.29.
func TestMayStick(t *testing.T) {
	f, err := LookupFault("reboot")
	if err != nil {
		t.Fatal(err)
	}
	off := map[string]bool{"NewVolumeManagerReconstruction": false}
	for _, tc := range []struct {
		to    string
		gates map[string]bool
		want  bool
	}{
		{"v1.28.15", off, true},
		{"v1.28.15", nil, false},
		{"v1.26.15", nil, true},
		{"v1.37.2", nil, false},
	} {
		s := &Scenario{cfg: Config{Fault: &f}, hop: &reports.Hop{To: tc.to, ToGates: tc.gates}}
		if got := s.mayStick(); got != tc.want {
			t.Errorf("reboot on kubelet %s%v: mayStick = %v, want %v", tc.to, tc.gates, got, tc.want)
		}
	}
	restart, err := LookupFault("restart-no-delete")
	if err != nil {
		t.Fatal(err)
	}
	if (&Scenario{cfg: Config{Fault: &restart}, hop: &reports.Hop{To: "v1.26.15"}}).mayStick() {
		t.Error("a fault that does not say its bug keeps pods down must not bound their wait")
	}
	s := &Scenario{stuck: "the kubelet set up PV pv-0 without staging it"}
	if o, err := observeStuckOrLeftovers(t.Context(), s, nil); err != nil || len(o.Traces) != 1 || o.Traces[0].Kind != catalogue.NotRunning || !strings.Contains(o.Detail, "without staging") {
		t.Errorf("stuck pods observed as %+v, %v", o, err)
	}
}

// A pvc-terminating hop needs a CSI volume still mounted in each pod:
// the kube-api-access projected volume alone proves nothing.
func TestPlantDeleteClaimsRefusesUnmountedVolumes(t *testing.T) {
	projected := map[string]int{"/k/pods/u1/volumes/kubernetes.io~projected/kube-api-access-x": 7}
	if hasCSIMount(projected) {
		t.Error("a projected mount counted as a CSI volume")
	}
	s := &Scenario{running: []running{{uid: "u1", name: "web-0", mounts: projected}}}
	err := plantDeleteClaims(t.Context(), s, nil)
	if err == nil || !strings.Contains(err.Error(), "has no CSI volume mounted") || !strings.Contains(err.Error(), "would have re-created the pods first") {
		t.Errorf("plantDeleteClaims on a pod without its CSI volume: %v", err)
	}
	projected["/k/pods/u1/volumes/kubernetes.io~csi/pv-0/mount"] = 8
	if !hasCSIMount(projected) {
		t.Error("the CSI volume's mount not seen")
	}
}
