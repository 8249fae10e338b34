package reconstruction

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/nodestate"
	"sigs.k8s.io/skewtest/scenarios/plan"
)

func TestLookupShapes(t *testing.T) {
	got, err := LookupShapes([]string{"csi-inline-ephemeral", "block"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Entry.Name != "block" || got[1].Entry.Name != "csi-inline-ephemeral" || !got[0].Block || got[1].Block {
		t.Errorf("LookupShapes = %+v, want block (raw block) then csi-inline-ephemeral, in catalogue order", got)
	}
	for _, bad := range [][]string{{"reboot"}, {"block", "block"}, {"csi-filesystem"}} {
		if _, err := LookupShapes(bad); err == nil {
			t.Errorf("LookupShapes(%v) accepted", bad)
		}
	}
	for name, sh := range Shapes() {
		if sh.check == nil || len(sh.owns) == 0 {
			t.Errorf("shape %s checks nothing or owns no path: it could never fail", name)
		}
		if sh.Entry.Status != catalogue.Runs {
			t.Errorf("shape %s is planted but the catalogue says it does not run (%s)", name, sh.Entry.Status)
		}
	}
}

// A leftover belongs to the shape whose volume it names; a pod dir to the
// shape whose mount keeps it, not to every shape whose empty dirs it
// still lists.
func TestLeftoverAttribution(t *testing.T) {
	shapes := Shapes()
	left := []nodestate.Leftover{
		{UID: "u1", Kind: nodestate.LeftoverPodDir, Path: "pods/u1", Detail: `dir still present (9 entries), kept by "volume-subpaths/host/workload/3" (mounted), "volumeDevices/kubernetes.io~csi" (empty dir)`},
		{UID: "u1", Kind: nodestate.LeftoverMount, Path: "/k/pods/u1/volume-subpaths/host/workload/3"},
	}
	for name, want := range map[string]bool{ShapeSubpath: true, ShapeBlock: false, ShapeEmptyDirMemory: false} {
		for _, l := range left {
			if got := ownsLeftover(shapes[name], l, left); got != want {
				t.Errorf("shape %s owns %s %s = %v, want %v", name, l.Kind, l.Path, got, want)
			}
		}
	}
	blockLeft := []nodestate.Leftover{{UID: "u2", Kind: nodestate.LeftoverPluginEntry, Path: "plugins/kubernetes.io/csi/volumeDevices/pv/dev/u2"}}
	if !ownsLeftover(shapes[ShapeBlock], blockLeft[0], blockLeft) || ownsLeftover(shapes[ShapeSubpath], blockLeft[0], blockLeft) {
		t.Error("a block map link is the block shape's alone")
	}

	// Only a shape that expects a known bug on the kubelet explains what
	// it leaves; anything else fails the hop.
	s := &Scenario{shapes: &shapeRun{list: []Shape{shapes[ShapeBlock], shapes[ShapeSubpath]}}}
	v := version.MustParseGeneric("1.36.3")
	if un := s.unexplainedLeftovers(left, v); len(un) != 0 {
		t.Errorf("subpath leftovers on 1.36 (known bug #135698) unexplained: %v", un)
	}
	if un := s.unexplainedLeftovers(blockLeft, v); len(un) != 1 {
		t.Errorf("a block leftover (expected clean) explained away: %v", un)
	}
	if !s.shapesMayLeave(v) {
		t.Error("the subpath shape expects a known bug on 1.36: the cleanup wait must be bounded")
	}
	if (&Scenario{shapes: &shapeRun{list: []Shape{shapes[ShapeBlock]}}}).shapesMayLeave(v) {
		t.Error("block alone expects a clean kubelet: the cleanup wait must not be bounded")
	}
	if e := (&Scenario{shapes: s.shapes, leftEver: left}).leakEntry(); e.Name != ShapeSubpath {
		t.Errorf("leakEntry = %s, want subpath", e.Name)
	}
}

// The workload carries every shape's volume, and podbin writes a marker
// into each writable one.
func TestAddShapes(t *testing.T) {
	all, err := LookupShapes([]string{ShapeBlock, ShapeSubpath, ShapeEmptyDirMemory, ShapeProjected, ShapeGenericEphemeral, ShapeCSIInline})
	if err != nil {
		t.Fatal(err)
	}
	s := &Scenario{cfg: Config{Name: "web", Namespace: "ns", Size: "16Mi", Plan: plan.Plan{}}, node: fakeNode{}}
	s.shapes = &shapeRun{list: all, has: map[string]bool{}, driver: "csi.example"}
	for _, sh := range all {
		s.shapes.has[sh.Entry.Name] = true
	}
	sts := statefulSet("web", "ns", "node-1", 1, "sc", "16Mi", corev1.ReadWriteOnce, storage.Workload{Image: "img"})
	s.addShapes(sts, "sc")
	pod := sts.Spec.Template.Spec
	c := pod.Containers[0]
	if got := strings.Join(c.Command, " "); got != "/podbin workload /data /dev/skewtest-block /sub /hostsub /mem /gen /inline" {
		t.Errorf("command %q", got)
	}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	switch {
	case vols[memVolume].EmptyDir == nil || vols[memVolume].EmptyDir.Medium != corev1.StorageMediumMemory:
		t.Errorf("emptyDir %+v", vols[memVolume])
	case vols[genVolume].Ephemeral == nil || *vols[genVolume].Ephemeral.VolumeClaimTemplate.Spec.StorageClassName != "sc":
		t.Errorf("generic ephemeral %+v", vols[genVolume])
	case vols[inlineVolume].CSI == nil || vols[inlineVolume].CSI.Driver != "csi.example":
		t.Errorf("inline %+v", vols[inlineVolume])
	case vols[projVolume].Projected == nil || len(vols[projVolume].Projected.Sources) != 3:
		t.Errorf("projected %+v", vols[projVolume])
	case vols[secVolume].Secret == nil || vols[cfgVolume].ConfigMap == nil:
		t.Errorf("secret %+v, configMap %+v", vols[secVolume], vols[cfgVolume])
	case vols[hostVolume].HostPath == nil || vols[hostVolume].HostPath.Path != "/var/lib/kubelet-skewtest-shapes-web":
		t.Errorf("hostPath %+v", vols[hostVolume])
	}
	if len(sts.Spec.VolumeClaimTemplates) != 2 || *sts.Spec.VolumeClaimTemplates[1].Spec.VolumeMode != corev1.PersistentVolumeBlock {
		t.Errorf("claim templates %+v, want the data claim and a Block one", sts.Spec.VolumeClaimTemplates)
	}
	if len(c.VolumeDevices) != 1 || c.VolumeDevices[0].DevicePath != blockDevice {
		t.Errorf("volumeDevices %+v", c.VolumeDevices)
	}
	subs := 0
	for _, m := range c.VolumeMounts {
		if m.SubPath != "" {
			subs++
		}
	}
	if subs != 3 {
		t.Errorf("%d subPath mounts, want the PVC's and the hostPath's directory and the configMap's file", subs)
	}
	if _, ok := CatalogueEntry(ShapeSubpath); !ok {
		t.Fatal("no subpath entry")
	}
}

// Shapes add a judged step per shape to every hop, and a last step that
// checks their volumes were released; a provider whose pods run a stock
// image (podbin cannot write the markers) is refused before anything runs.
func TestShapeSteps(t *testing.T) {
	p, err := plan.Parse("v1.37.2,v1.36.3,v1.37.2")
	if err != nil {
		t.Fatal(err)
	}
	shapes, err := LookupShapes([]string{ShapeBlock, ShapeSubpath})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Plan: p, Kubelets: make([]binaries.Binary, 3), Shapes: shapes}, fakeCluster{}, fakeNode{}, &reports.Run{})
	if err != nil {
		t.Fatal(err)
	}
	judged := map[int][]string{}
	var last string
	for _, st := range s.Steps() {
		if strings.Contains(st.Name, ": catalogue shape ") {
			judged[st.Hop] = append(judged[st.Hop], strings.SplitN(st.Name, ": ", 2)[1])
		}
		last = st.Name
	}
	if got := strings.Join(judged[2], "|"); got != "catalogue shape block on kubelet v1.37.2|catalogue shape subpath on kubelet v1.37.2" || len(judged[1]) != 2 {
		t.Errorf("judged steps %v", judged)
	}
	if !strings.Contains(last, "shapes' volumes") {
		t.Errorf("last step %q, want the shapes' volumes released", last)
	}
	if _, err := New(Config{Plan: p, Kubelets: make([]binaries.Binary, 3), Shapes: shapes}, busyboxCluster{}, fakeNode{}, &reports.Run{}); err == nil || !strings.Contains(err.Error(), "workload image") {
		t.Errorf("shapes on a stock image: %v", err)
	}
	if _, err := New(Config{Plan: p, Kubelets: make([]binaries.Binary, 3), Shapes: shapes, Kind: storage.Local}, fakeCluster{}, fakeNode{}, &reports.Run{}); err == nil || !strings.Contains(err.Error(), "CSI volumes") {
		t.Errorf("shapes on local volumes: %v", err)
	}
}

type busyboxCluster struct{ fakeCluster }

func (busyboxCluster) Workload() storage.Workload {
	return storage.Workload{Image: "busybox", Command: storage.BusyboxCommand}
}
