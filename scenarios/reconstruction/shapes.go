package reconstruction

// This file is the catalogue shapes' registry and what the shapes share:
// provisioning their volumes, adding them to the pod, recording what each
// hop is compared with, and judging each shape after the hop. Each shape's
// own check is in its shape_*.go file.

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/e2e-framework/klient/wait"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/loopdev"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/kubeletmetrics"
	"sigs.k8s.io/skewtest/scenarios/nodestate"
)

var _ = addEntry(catalogue.Entry{
	Name:   "local-volume",
	Plants: "csi-filesystem's workload on kubernetes.io/local-volume PVs (bind mounts of host dirs)",
	Checks: "as csi-filesystem; the kubelet's reconstruction errors and force cleanups, exactly one each per local volume, are the known symptom",
	Expect: []catalogue.Expectation{{From: "1.34", Outcome: catalogue.KnownBug, Bug: "local-volume reconstruction errors", Says: localVolumeSays, Symptom: localVolumeSymptom,
		Refs: []catalogue.Ref{{ID: "kubernetes#121675", URL: "https://github.com/kubernetes/kubernetes/issues/121675"}}}},
	Needs: []nodes.Capability{nodes.HostNode},
})

// Local-volume PVs: the kubelets skewtest runs cannot reconstruct them;
// see kubeletmetrics.LocalVolumeReconstructionReason.
const localVolumeSays = "reconstructVolume.NewMounter fails (local volume source is nil); the kubelet falls back to force cleanup, which still removes the mounts and dirs; reconstruct_volume_operations_errors_total equals the number of local volumes"

// localVolumeSymptom: reconstruction fails for each deleted pod's local
// volume (reconstructVolume, v1.34-v1.37: the plugin's NewMounter needs
// the PV's source, which a reconstructed spec lacks), each is force-cleaned
// once the desired state is populated (cleanOrphanVolumes), and the local
// plugin's unmounter needs no spec, so the cleanup succeeds and nothing is
// left.
var localVolumeSymptom = catalogue.Symptom{
	Logs: []string{"Could not construct volume information*" + catalogue.OldUID + "*reconstructVolume.NewMounter failed*local volume source is nil or local path is not set"},
	Counters: []catalogue.Counter{
		{Metric: kubeletmetrics.ReconstructVolumeOperationsErrors, Of: catalogue.LocalVolumeDirs},
		{Metric: kubeletmetrics.ForceCleanedFailedVolumeOps, Of: catalogue.LocalVolumeDirs},
	},
}

// Shape is a catalogue shape the scenario adds to its StatefulSet's pod
// beside the filesystem PVC (the csi-filesystem shape). Several shapes go
// into one pod, on one cluster: each hop force-deletes that pod, and each
// shape is then checked and judged on its own step ("hop 1: catalogue
// shape block on kubelet v1.36.3"), against its own expectation.
type Shape struct {
	Entry catalogue.Entry
	// Block: the shape needs a CSI driver that serves raw block volumes
	// (skewtest's driver in CSI_MODE=ebs).
	Block bool
	// owns are fragments of the node paths that belong to the shape (a
	// leftover naming one is the shape's); see Scenario.shapeOwns.
	owns []string
	// check reads the node after the hop and tells whether the shape's
	// bug showed; an error is a check that could not be made or data that
	// did not survive.
	check func(ctx context.Context, s *Scenario, sc *scenarios.StepContext, to *version.Version) (catalogue.Observation, error)
}

// The shapes' names in the catalogue.
const (
	ShapeBlock            = "block"
	ShapeSubpath          = "subpath"
	ShapeEmptyDirMemory   = "emptydir-memory"
	ShapeProjected        = "projected-secret-configmap"
	ShapeGenericEphemeral = "generic-ephemeral"
	ShapeCSIInline        = "csi-inline-ephemeral"
)

// The shapes' pod volumes, container paths and API objects.
const (
	shapeObjects  = "skewtest-shapes" // the ConfigMap and the Secret
	cfgKey        = "file.txt"
	secretKey     = "token"
	uidKey        = "uid"
	blockVolume   = "block"
	blockDevice   = "/dev/skewtest-block"
	cfgVolume     = "cfg"
	secVolume     = "sec"
	projVolume    = "proj"
	memVolume     = "mem"
	genVolume     = "gen"
	inlineVolume  = "inline"
	hostVolume    = "host"
	subDir        = "sub"
	containerName = "workload"
	// rawMarkerMagic starts the marker podbin writes on a raw device
	// (podbin's RawMagic; podbin is a program of its own and cannot be
	// imported).
	rawMarkerMagic = "skewtest-marker:"
	// markerWait bounds how long a marker may take to appear once the pod
	// runs: podbin writes its markers one after the other at start.
	markerWait = 30 * time.Second
	// releaseWait bounds the wait for a volume no pod uses to be unstaged
	// and detached (the attach/detach controller acts on the node's
	// volumesInUse, which the kubelet reports every 10 s).
	releaseWait = 90 * time.Second
)

// Shapes are the catalogue shapes the scenario can add, by entry name
// (each declared with addShape beside its code).
func Shapes() map[string]Shape {
	out := map[string]Shape{}
	for name, sh := range registry.shapes {
		out[name] = sh
	}
	return out
}

// allShapes names every shape Shapes has, in catalogue order.
func allShapes() []string {
	var out []string
	for _, e := range Catalogue() {
		if _, ok := registry.shapes[e.Name]; ok {
			out = append(out, e.Name)
		}
	}
	return out
}

// LookupShapes resolves shape names (a catalogue shape each, none twice),
// in catalogue order.
func LookupShapes(names []string) ([]Shape, error) {
	all := Shapes()
	want := map[string]bool{}
	for _, n := range names {
		if _, ok := all[n]; !ok {
			var known []string
			for k := range all {
				known = append(known, k)
			}
			sort.Strings(known)
			return nil, fmt.Errorf("no catalogue shape %q that the scenario plants; shapes: %s", n, strings.Join(known, ", "))
		}
		if want[n] {
			return nil, fmt.Errorf("shape %q named twice", n)
		}
		want[n] = true
	}
	var out []Shape
	for _, e := range Catalogue() {
		if want[e.Name] {
			out = append(out, all[e.Name])
		}
	}
	return out, nil
}

// shapeRun is what the shapes of a run carry between steps.
type shapeRun struct {
	list []Shape
	has  map[string]bool
	// block and gen are the shapes' PVs: one block PV per replica;
	// per replica, one generic ephemeral PV per plan entry (each pod's
	// claim gets a fresh one, as from a provisioner).
	block, gen storage.Volumes
	driver     string
	// markers written at deploy, by "<shape>/<PV>".
	markers map[string]string
	// genPV is the PV each pod's ephemeral claim was bound to, by pod name.
	genPV map[string]string
	// pools are the generic ephemeral PVs by the claim name they are for,
	// handed to each new claim by UID (claims.go).
	pools map[string]*claimPool
	// loops is how many loop devices back the block volumes at deploy;
	// loopsDown, which did while the kubelet was down (this hop).
	loops     int
	loopsDown []loopdev.Device
	// attaching: the driver attaches volumes (VolumeAttachments exist).
	attaching bool
}

// leakEntry is the catalogue entry whose bug left the old pods' state
// (s.leftEver): the fault, or the first shape owning a leftover.
func (s *Scenario) leakEntry() catalogue.Entry {
	if s.cfg.Fault != nil {
		return s.cfg.Fault.Entry
	}
	for _, sh := range s.shapes.list {
		for _, l := range s.leftEver {
			if ownsLeftover(sh, l, s.leftEver) {
				return sh.Entry
			}
		}
	}
	return s.shapes.list[0].Entry
}

// shapeObjectsData are the ConfigMap's and Secret's contents.
func shapeObjectsData(namespace string) (cfg, sec map[string]string) {
	return map[string]string{cfgKey: "configMap " + namespace + "/" + shapeObjects + " key " + cfgKey},
		map[string]string{secretKey: "secret " + namespace + "/" + shapeObjects + " key " + secretKey}
}

// checkShapesPossible refuses shapes the cluster cannot carry, before
// anything is made.
func (s *Scenario) checkShapesPossible() error {
	if s.shapes == nil {
		return nil
	}
	if s.cfg.Kind != storage.CSI {
		return fmt.Errorf("catalogue shapes need CSI volumes, not VOLUME_KIND=%s", s.cfg.Kind)
	}
	if w := s.cluster.Workload(); len(w.Command) > 0 {
		return fmt.Errorf("catalogue shapes need skewtest's workload image (podbin writes their markers); this provider runs %s", w.Image)
	}
	return nil
}

// provisionShapes makes the shapes' PVs (pre-bound, as the StatefulSet's)
// and their ConfigMap and Secret.
func (s *Scenario) provisionShapes(ctx context.Context, sc *scenarios.StepContext) error {
	sh := s.shapes
	if sh.has[ShapeBlock] {
		var claims []string
		for i := range s.cfg.Replicas {
			claims = append(claims, claimNameOf(blockVolume, s.cfg.Name, i))
		}
		v, err := s.cluster.ProvisionVolumes(ctx, storage.Request{Kind: s.cfg.Kind, Namespace: s.cfg.Namespace, Claims: claims, Size: s.cfg.Size, Node: s.node.String(), Group: s.volumeGroup(blockVolume), Block: true, Labels: s.labels()})
		if err != nil {
			return fmt.Errorf("provision the block shape's volumes: %w", err)
		}
		sh.block = v
		sc.Note("block shape: %d volumeMode Block PVs pre-bound: %s", len(v.PVs), pvNames(v))
	}
	if sh.has[ShapeGenericEphemeral] {
		// One PV per pod and plan entry, each reserved for a claim name
		// no claim has; bindNewClaims hands them out by UID.
		var reserved []string
		pools := map[string]*claimPool{}
		for i := range s.cfg.Replicas {
			for k := range s.cfg.Plan.Versions {
				reserved = append(reserved, reservedClaim(s.cfg.Name, i, k))
			}
		}
		v, err := s.cluster.ProvisionVolumes(ctx, storage.Request{Kind: s.cfg.Kind, Namespace: s.cfg.Namespace, Claims: reserved, Size: s.cfg.Size, Node: s.node.String(), Group: s.volumeGroup(genVolume), Labels: s.labels()})
		if err != nil {
			return fmt.Errorf("provision the generic ephemeral shape's volumes: %w", err)
		}
		for j, pv := range v.PVs {
			claim := genClaim(s.cfg.Name, j/len(s.cfg.Plan.Versions))
			if pools[claim] == nil {
				pools[claim] = &claimPool{claim: claim, given: map[types.UID]string{}}
			}
			pools[claim].pvs = append(pools[claim].pvs, pv.Name)
		}
		sh.gen, sh.pools = v, pools
		sc.Note("generic-ephemeral shape: %d PVs, one per pod and plan entry, each reserved for a claim name no claim has until a new ephemeral claim exists and is given the next one by its UID (claimRef name and uid), so each claim binds a fresh volume as from a provisioner and no two PVs bind one claim: %s", len(v.PVs), pvNames(v))
	}
	if sh.has[ShapeSubpath] || sh.has[ShapeProjected] {
		cfg, sec := shapeObjectsData(s.cfg.Namespace)
		// In the run's own namespace, made just before: nothing of that
		// name can be there but another's (workloads.ErrNotOurs).
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: shapeObjects, Namespace: s.cfg.Namespace, Labels: s.labels()}, Data: cfg}
		if err := s.res.Create(ctx, cm); err != nil {
			return fmt.Errorf("create ConfigMap %s/%s: %w", s.cfg.Namespace, shapeObjects, notOurs(err))
		}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: shapeObjects, Namespace: s.cfg.Namespace, Labels: s.labels()}, StringData: sec}
		if err := s.res.Create(ctx, secret); err != nil {
			return fmt.Errorf("create Secret %s/%s: %w", s.cfg.Namespace, shapeObjects, notOurs(err))
		}
	}
	return nil
}

// hostPathDir is the subpath shape's hostPath volume on the node: beside
// the kubelet root (under the local provider's run directory, in a kind
// node's container), so it goes with the cluster. #135698 was reported
// with a hostPath subPath.
func (s *Scenario) hostPathDir() string {
	return path.Clean(s.node.KubeletRootDir()) + "-" + shapeObjects + "-" + s.cfg.Name
}

// pvNames are v's PV names, in words.
func pvNames(v storage.Volumes) string { return strings.Join(pvNameList(v), ", ") }

// pvNameList are v's PV names.
func pvNameList(v storage.Volumes) []string {
	var out []string
	for _, pv := range v.PVs {
		out = append(out, pv.Name)
	}
	return out
}

// claimNameOf is the PVC the StatefulSet controller makes for template
// vol and ordinal i.
func claimNameOf(vol, sts string, i int) string { return fmt.Sprintf("%s-%s-%d", vol, sts, i) }

// addShapes puts the shapes' volumes into the StatefulSet's pod, and the
// paths podbin writes markers to into its command.
func (s *Scenario) addShapes(sts *appsv1.StatefulSet, sc string) {
	sh := s.shapes
	spec := &sts.Spec.Template.Spec
	c := &spec.Containers[0]
	markers := []string{"/data"}
	size := resource.MustParse(s.cfg.Size)
	addCfg := func() {
		for _, v := range spec.Volumes {
			if v.Name == cfgVolume {
				return
			}
		}
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: cfgVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: shapeObjects}}}})
	}
	if sh.has[ShapeBlock] {
		sts.Spec.VolumeClaimTemplates = append(sts.Spec.VolumeClaimTemplates, corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: blockVolume},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: ptr.To(sc),
				VolumeMode:       ptr.To(corev1.PersistentVolumeBlock),
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
			},
		})
		c.VolumeDevices = append(c.VolumeDevices, corev1.VolumeDevice{Name: blockVolume, DevicePath: blockDevice})
		markers = append(markers, blockDevice)
	}
	if sh.has[ShapeSubpath] {
		addCfg()
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: hostVolume, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
			Path: s.hostPathDir(), Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}})
		c.VolumeMounts = append(c.VolumeMounts,
			corev1.VolumeMount{Name: volumeName, MountPath: "/" + subDir, SubPath: subDir},
			corev1.VolumeMount{Name: cfgVolume, MountPath: "/etc/skewtest/" + cfgKey, SubPath: cfgKey, ReadOnly: true},
			corev1.VolumeMount{Name: hostVolume, MountPath: "/" + hostVolume + subDir, SubPath: subDir})
		markers = append(markers, "/"+subDir, "/"+hostVolume+subDir)
	}
	if sh.has[ShapeEmptyDirMemory] {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: memVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &size}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: memVolume, MountPath: "/" + memVolume})
		markers = append(markers, "/"+memVolume)
	}
	if sh.has[ShapeProjected] {
		addCfg()
		spec.Volumes = append(spec.Volumes,
			corev1.Volume{Name: secVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: shapeObjects}}},
			corev1.Volume{Name: projVolume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: shapeObjects}}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: shapeObjects}}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: uidKey, FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}}}},
			}}}})
		c.VolumeMounts = append(c.VolumeMounts,
			corev1.VolumeMount{Name: cfgVolume, MountPath: "/" + cfgVolume, ReadOnly: true},
			corev1.VolumeMount{Name: secVolume, MountPath: "/" + secVolume, ReadOnly: true},
			corev1.VolumeMount{Name: projVolume, MountPath: "/" + projVolume, ReadOnly: true})
	}
	if sh.has[ShapeGenericEphemeral] {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: genVolume, VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
			VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: ptr.To(sc),
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
			}},
		}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: genVolume, MountPath: "/" + genVolume})
		markers = append(markers, "/"+genVolume)
	}
	if sh.has[ShapeCSIInline] {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: inlineVolume, VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
			Driver: sh.driver, VolumeAttributes: map[string]string{"capacity": s.cfg.Size},
		}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: inlineVolume, MountPath: "/" + inlineVolume})
		markers = append(markers, "/"+inlineVolume)
	}
	c.Command = append([]string{"/podbin", "workload"}, markers...)
}

// recordShapes reads, once the pods run, what the checks compare against
// after each hop: the persistent shapes' markers, the generic ephemeral
// claims' PVs, the block volumes' loop devices, the VolumeAttachments.
func (s *Scenario) recordShapes(ctx context.Context, sc *scenarios.StepContext) error {
	sh := s.shapes
	pods, err := s.listPods(ctx)
	if err != nil {
		return err
	}
	snap, err := s.snapshot(ctx, sc.QuietNode)
	if err != nil {
		return err
	}
	for _, p := range pods {
		uid := string(p.UID)
		if sh.has[ShapeBlock] {
			pv, err := s.boundPV(ctx, claimNameOf(blockVolume, s.cfg.Name, ordinal(p)))
			if err != nil {
				return err
			}
			m, err := s.readRawMarker(ctx, sc, snap.Abs(blockLink(uid, pv)))
			if err != nil {
				return err
			}
			sh.markers[ShapeBlock+"/"+pv] = m
			sc.Note("pod %s uid %s wrote marker %q on block PV %s (%s)", p.Name, uid, m, pv, blockDevice)
		}
		if sh.has[ShapeSubpath] {
			pv := s.pvOf[claimOf(p)]
			m, err := s.readFileMarker(ctx, sc, snap.Abs(podVolumeDir(s.cfg.Kind, uid, pv))+"/"+subDir+"/marker")
			if err != nil {
				return err
			}
			sh.markers[ShapeSubpath+"/"+pv] = m
			sc.Note("pod %s uid %s wrote marker %q through subPath %s of PV %s", p.Name, uid, m, subDir, pv)
			hm, err := s.readFileMarker(ctx, sc, path.Join(s.hostPathDir(), subDir, "marker"))
			if err != nil {
				return err
			}
			sh.markers[ShapeSubpath+"/"+hostVolume+"/"+p.Name] = hm
			sc.Note("pod %s uid %s wrote marker %q through subPath %s of hostPath %s", p.Name, uid, hm, subDir, s.hostPathDir())
		}
		if sh.has[ShapeGenericEphemeral] {
			pv, err := s.boundPV(ctx, p.Name+"-"+genVolume)
			if err != nil {
				return err
			}
			sh.genPV[p.Name] = pv
			sc.Note("pod %s uid %s: ephemeral claim %s-%s bound to PV %s", p.Name, uid, p.Name, genVolume, pv)
		}
	}
	if sh.has[ShapeBlock] {
		loops, err := s.blockLoops(ctx, sc, snap)
		if err != nil {
			return err
		}
		sh.loops = len(loops)
		sc.Note("block shape: %d loop devices back the block volumes: %s", len(loops), describeLoops(loops))
		if sh.loops == 0 {
			return fmt.Errorf("block shape: no loop device backs the block volumes %s: the shape would prove nothing", pvNames(sh.block))
		}
	}
	vas, err := s.volumeAttachments(ctx)
	if err != nil {
		return err
	}
	sh.attaching = len(vas) > 0
	if sh.attaching {
		sc.Evidence(reports.Evidence{Name: "VolumeAttachments with the pods running", Kind: "api", Text: describeVAs(vas)})
	}
	return nil
}

func ordinal(p corev1.Pod) int {
	i := strings.LastIndex(p.Name, "-")
	n := 0
	fmt.Sscanf(p.Name[i+1:], "%d", &n)
	return n
}

func (s *Scenario) boundPV(ctx context.Context, claim string) (string, error) {
	var pvc corev1.PersistentVolumeClaim
	if err := s.res.Get(ctx, claim, s.cfg.Namespace, &pvc); err != nil {
		return "", fmt.Errorf("get PVC %s/%s: %w", s.cfg.Namespace, claim, err)
	}
	if pvc.Spec.VolumeName == "" {
		return "", fmt.Errorf("PVC %s/%s is not bound", s.cfg.Namespace, claim)
	}
	return pvc.Spec.VolumeName, nil
}

// readFileMarker reads a marker file on the node, waiting for podbin to
// have written it.
func (s *Scenario) readFileMarker(ctx context.Context, sc *scenarios.StepContext, file string) (string, error) {
	var got string
	var last error
	cond := func(ctx context.Context) (bool, error) {
		res, err := exec.Output(ctx, sc.QuietNode, "cat", file)
		if err != nil {
			last = err
			return false, nil
		}
		got = strings.TrimSpace(res.Stdout)
		return got != "", nil
	}
	if err := wait.For(cond, wait.WithContext(ctx), wait.WithTimeout(s.scaled(markerWait)), wait.WithInterval(s.cfg.PollInterval), wait.WithImmediate()); err != nil {
		return "", fmt.Errorf("read marker %s: %w (last: %v)", file, err, last)
	}
	return got, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// recordShapesDown records, with the kubelet down and the pods
// force-deleted, what the shapes' checks compare with after the hop: the
// block volumes' loop devices, the old pod's among them.
func (s *Scenario) recordShapesDown(ctx context.Context, sc *scenarios.StepContext) error {
	if !s.hasShape(ShapeBlock) {
		return nil
	}
	loops, err := s.blockLoops(ctx, sc, s.down)
	if err != nil {
		return err
	}
	s.shapes.loopsDown = loops
	sc.Evidence(reports.Evidence{Name: "block volumes: loop devices while the kubelet is down", Kind: "losetup", Text: describeLoops(loops) + "\n"})
	return nil
}

func (s *Scenario) hasShape(name string) bool { return s.shapes != nil && s.shapes.has[name] }

// shapesMayLeave: a shape expects a known bug on kubelet to that leaves
// old pods' state behind, so the cleanup wait is bounded and what is left
// is judged by the shapes.
func (s *Scenario) shapesMayLeave(to *version.Version) bool {
	if s.shapes == nil || s.cfg.Fault != nil {
		// A fault's shapes are its workload: the fault says (MayLeave).
		return false
	}
	for _, sh := range s.shapes.list {
		if x, ok := sh.Entry.ExpectationForKubelet(to, s.hopGates()); ok && x.Outcome == catalogue.KnownBug {
			return true
		}
	}
	return false
}

// shapeOwns tells whether a path (a mount point, an entry) belongs to
// shape sh: it names one of the shape's volumes.
func shapeOwns(sh Shape, l nodestate.Leftover) bool {
	for _, f := range sh.owns {
		if strings.Contains(l.Path, f) {
			return true
		}
	}
	return false
}

// ownsLeftover tells whether an old pod's leftover belongs to shape sh,
// among all the leftovers: a mount or plugin entry by its path; a pod dir
// by the shape's mounts it still holds (what keeps the dir), or, with none
// left, by what its detail says keeps it.
func ownsLeftover(sh Shape, l nodestate.Leftover, all []nodestate.Leftover) bool {
	if l.Kind != nodestate.LeftoverPodDir {
		return shapeOwns(sh, l)
	}
	mounts := false
	for _, o := range all {
		if o.UID == l.UID && o.Kind == nodestate.LeftoverMount {
			mounts = true
			if shapeOwns(sh, o) {
				return true
			}
		}
	}
	return !mounts && shapeOwns(sh, nodestate.Leftover{Path: l.Detail})
}

// unexplainedLeftovers are the old pods' leftovers that no shape expecting
// a known bug on kubelet to owns: each fails the hop as in the baseline.
// What a known-bug shape owns is judged against its bug's symptom
// (judgeShape).
func (s *Scenario) unexplainedLeftovers(left []nodestate.Leftover, to *version.Version) []nodestate.Leftover {
	var out []nodestate.Leftover
	for _, l := range left {
		explained := false
		for _, sh := range s.knownBugShapes(to) {
			if ownsLeftover(sh, l, left) {
				explained = true
			}
		}
		if !explained {
			out = append(out, l)
		}
	}
	return out
}

// unexplainedTraces are the files and links inside the old pods' dirs
// (oldPodTraces) that no shape expecting a known bug on kubelet to owns:
// each fails the hop as in the baseline.
func (s *Scenario) unexplainedTraces(traces []catalogue.Trace, to *version.Version) []catalogue.Trace {
	var out []catalogue.Trace
	for _, t := range traces {
		if t.Kind != catalogue.File {
			continue // the leftovers themselves: unexplainedLeftovers
		}
		explained := false
		for _, sh := range s.knownBugShapes(to) {
			if shapeOwns(sh, nodestate.Leftover{Path: t.Path}) {
				explained = true
			}
		}
		if !explained {
			out = append(out, t)
		}
	}
	return out
}

// knownBugShapes are the run's shapes that expect a known bug on kubelet
// to.
func (s *Scenario) knownBugShapes(to *version.Version) []Shape {
	var out []Shape
	for _, sh := range s.shapes.list {
		if x, ok := sh.Entry.ExpectationForKubelet(to, s.hopGates()); ok && x.Outcome == catalogue.KnownBug {
			out = append(out, sh)
		}
	}
	return out
}

func joinTraces(ts []catalogue.Trace) string {
	var out []string
	for _, t := range ts {
		out = append(out, t.String())
	}
	return strings.Join(out, "; ")
}

// shapeTraces are the old pods' leftovers the shape owns, as traces, and
// the files and links inside the old pods' dirs that name the shape's
// volumes.
func (s *Scenario) shapeTraces(sh Shape, left []nodestate.Leftover) []catalogue.Trace {
	var owned []nodestate.Leftover
	for _, l := range left {
		if ownsLeftover(sh, l, left) {
			owned = append(owned, l)
		}
	}
	var out []catalogue.Trace
	for _, t := range oldPodTraces(s.leftSnap, owned) {
		if t.Kind != catalogue.File {
			out = append(out, t)
		}
	}
	for _, t := range oldPodTraces(s.leftSnap, left) {
		if t.Kind == catalogue.File && shapeOwns(sh, nodestate.Leftover{Path: t.Path}) {
			out = append(out, t)
		}
	}
	return out
}

// judgeShape checks one shape after the hop and asks the catalogue what
// the observation means for kubelet to.
func (s *Scenario) judgeShape(sh Shape, to *version.Version) func(context.Context, *scenarios.StepContext) error {
	return func(ctx context.Context, sc *scenarios.StepContext) error {
		// What the old pods had of the shape while the kubelet was down:
		// the state the kubelet had to reconstruct and clean.
		var had []string
		for _, u := range s.oldUIDs {
			ps := s.down.Pod(u)
			for _, m := range append(ps.Mounts, ps.PluginMounts...) {
				if shapeOwns(sh, nodestate.Leftover{Path: m.MountPoint}) {
					had = append(had, "mount "+m.FSType+" "+m.MountPoint)
				}
			}
			for _, e := range append(ps.Entries, ps.PluginEntries...) {
				if shapeOwns(sh, nodestate.Leftover{Path: e}) && s.down.MountCount(e) == 0 {
					had = append(had, "entry "+e)
				}
			}
		}
		if sh.Block {
			for _, d := range s.shapes.loopsDown {
				had = append(had, "loop device "+d.Path+" backed by "+d.BackingFile)
			}
		}
		if len(had) == 0 {
			return fmt.Errorf("shape %s: the old pods %v had nothing of the shape on the node while the kubelet was down: the hop would prove nothing", sh.Entry.Name, s.oldUIDs)
		}
		sc.Evidence(reports.Evidence{Name: fmt.Sprintf("what the old pods had of shape %s while the kubelet was down", sh.Entry.Name), Kind: "snapshot", Text: strings.Join(had, "\n") + "\n"})
		var left []nodestate.Leftover
		for _, l := range s.left {
			if ownsLeftover(sh, l, s.left) {
				left = append(left, l)
			}
		}
		o, err := sh.check(ctx, s, sc, to)
		if err != nil {
			return err
		}
		if len(left) > 0 {
			// The headline names what the kubelet could not remove and
			// quotes its own error line for the UID.
			o.Detail = fmt.Sprintf("left by the old pods %s after the kubelet's start: %s; %s", mayLeaveBound, s.leftoverHeadline(ctx, left), o.Detail)
		} else {
			o.Detail = fmt.Sprintf("the old pods' %d mounts and entries of the shape are gone; %s", len(had), o.Detail)
		}
		s.evidence(ctx, &o, s.shapeTraces(sh, s.left))
		sc.Note("observed: %s", o.Detail)
		d, err := catalogue.Judge(sh.Entry, to, s.hopGates(), o)
		if err != nil {
			return err
		}
		if d != nil {
			sc.Deviation(*d)
		}
		return nil
	}
}

// judgeLocalVolume asks the catalogue what the hop of a run on local
// volumes (the local-volume shape: the baseline on kubernetes.io/local-volume
// PVs) means for kubelet to: the kubelets skewtest runs cannot
// reconstruct such volumes, so the reconstruction errors and force
// cleanups are the known symptom, exactly.
func (s *Scenario) judgeLocalVolume(to *version.Version) func(context.Context, *scenarios.StepContext) error {
	return func(ctx context.Context, sc *scenarios.StepContext) error {
		e, ok := CatalogueEntry(localVolumeEntry)
		if !ok {
			return fmt.Errorf("no catalogue entry %s", localVolumeEntry)
		}
		o := catalogue.Observation{Detail: fmt.Sprintf("old pods %s cleaned; %d local volumes of theirs at the kubelet's start", strings.Join(s.oldUIDs, ", "), s.symptomCounts()[catalogue.LocalVolumeDirs])}
		s.evidence(ctx, &o, oldPodTraces(s.leftSnap, s.left))
		sc.Note("observed: %s", o.Detail)
		d, err := catalogue.Judge(e, to, s.hopGates(), o)
		if err != nil {
			return err
		}
		if d != nil {
			sc.Deviation(*d)
		}
		return nil
	}
}

// newPods are the StatefulSet's pods now (the re-created ones) with a
// fresh snapshot.
func (s *Scenario) newPods(ctx context.Context, sc *scenarios.StepContext) ([]corev1.Pod, *nodestate.Snapshot, error) {
	pods, err := s.listPods(ctx)
	if err != nil {
		return nil, nil, err
	}
	snap, err := s.snapshot(ctx, sc.QuietNode)
	if err != nil {
		return nil, nil, err
	}
	return pods, snap, nil
}

// freshMarker checks an ephemeral volume of the re-created pod: a new,
// empty volume, so its marker names the new pod's UID.
func (s *Scenario) freshMarker(ctx context.Context, sc *scenarios.StepContext, p corev1.Pod, dir string) (string, error) {
	m, err := s.readFileMarker(ctx, sc, dir+"/marker")
	if err != nil {
		return "", err
	}
	if !strings.Contains(m, "uid "+string(p.UID)+" ") {
		return "", fmt.Errorf("pod %s (uid %s): the marker in its ephemeral volume %s is %q, not one the new pod wrote: an old pod's volume was handed over", p.Name, p.UID, dir, m)
	}
	return m, nil
}

// checkMounted finds rel mounted exactly once with file system fstype
// ("" for any).
func checkMounted(snap *nodestate.Snapshot, p corev1.Pod, rel, fstype string) error {
	n := snap.MountCount(rel)
	if n != 1 {
		return fmt.Errorf("pod %s (uid %s): %s is mounted %d times, want 1", p.Name, p.UID, snap.Abs(rel), n)
	}
	if fstype == "" {
		return nil
	}
	for _, m := range snap.Mounts() {
		if m.MountPoint == snap.Abs(rel) && m.FSType != fstype {
			return fmt.Errorf("pod %s (uid %s): %s is a %s mount, want %s", p.Name, p.UID, snap.Abs(rel), m.FSType, fstype)
		}
	}
	return nil
}

// ShapeGroups splits catalogue shapes into the workloads a batch plants
// them in: those that need raw block volumes (the CSI driver's ebs mode,
// a cluster of its own) apart from the others, which share the cluster of
// the tmpfs mode's runs. Unknown names go with the others, for the run's
// validation to refuse.
func ShapeGroups(names []string) (plain, block []string) {
	for _, n := range names {
		if sh, ok := Shapes()[n]; ok && sh.Block {
			block = append(block, n)
		} else {
			plain = append(plain, n)
		}
	}
	return plain, block
}
