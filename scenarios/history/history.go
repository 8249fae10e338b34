// Package history is what `make test-history` runs: KEP-3756's own
// sign-off replayed with the nearest kubelets the Go module proxy builds,
// and catalogue entries on kubelets where their bugs shipped and where
// they were fixed. Each run is judged by the catalogue as any run is; the
// history suite also requires that every known bug the catalogue expects
// of a hop's kubelet reproduces there, and that each kubelet reports the
// reconstruction path listed here, read from its own log.
package history

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/plan"
	"sigs.k8s.io/skewtest/scenarios/reconstruction"
)

// Label is the Ginkgo label of the history specs: make test-history
// selects them, make test-skew leaves them out.
const Label = "history"

// Reconstruction paths as the report words them (kubeletmetrics.PathNew,
// PathOld).
const (
	New = "new"
	Old = "old"
)

// Run is one run of the history: a plan under a control plane, with a
// catalogue entry or the baseline force-delete.
type Run struct {
	// Name is the run's label suffix (history-<name>) and the name the
	// sign-off page gives it.
	Name string
	// APIServer is the control plane's version (APISERVER).
	APIServer string
	// Plan is the kubelet plan, gates and all (PLAN).
	Plan string
	// Scenario is the catalogue entry (SCENARIO); "" for the baseline.
	Scenario string
	// Paths, when set, are the reconstruction paths the plan's kubelets
	// must report in plan order, the first one's read before the first
	// hop. Unset for an entry that deletes nothing: the old path logs
	// nothing of its own when no deleted pod's volume is on disk.
	Paths []string
	// Proves says what the run shows, for the reader of the page.
	Proves string
}

// signoffPlan is KEP-3756's manual sign-off as the proxy can build it:
// 1.27 cannot be built from the module here (k8s.io/legacy-cloud-providers
// and k8s.io/cloud-provider@v0.27.9 are not served), and 1.26.15 runs the
// old reconstruction by default as 1.27.9 did, so the hop down is new →
// old as it was.
const signoffPlan = "v1.28.5,v1.26.15,v1.28.5"

// olderControlPlane serves the 1.26 and 1.28 kubelets: the newest 1.28
// control plane the proxy builds (1.28.5's controller-manager needs
// k8s.io/endpointslice@v0.28.5, not served), within n-3 of 1.26.
const olderControlPlane = "v1.28.15"

// newerControlPlane serves the 1.32 kubelets: no 1.32 to 1.34 control
// plane but 1.35.4 builds here (1.32.13's controller-manager needs
// k8s.io/endpointslice@v0.32.13), and a 1.32 kubelet is within n-3 of it.
const newerControlPlane = "v1.35.4"

// Runs are the history, in the order make test-history runs them.
func Runs() []Run {
	return []Run{
		{Name: "kep-3756-signoff", APIServer: olderControlPlane, Plan: signoffPlan, Paths: []string{New, Old, New},
			Proves: "the sign-off of KEP-3756 (1.28.5 → 1.27.9 → 1.28.5, new → old → new reconstruction) replayed with full checks: 1.26.15 stands in for 1.27.9, which the proxy cannot build"},
		{Name: "kep-3756-gate", APIServer: olderControlPlane, Plan: "v1.28.15,v1.28.15+NewVolumeManagerReconstruction=false,v1.28.15", Paths: []string{New, Old, New},
			Proves: "the same hand-over in one binary: NewVolumeManagerReconstruction on → off → on"},
		// The kubelet with #130335 unmounts the volumes for good (their
		// claims are Terminating); a hop after it re-creates the pods
		// first (pvc-terminating-bug-between).
		{Name: "pvc-terminating-1.32", APIServer: newerControlPlane, Plan: "v1.32.2,v1.32.13,v1.32.2", Scenario: "pvc-terminating",
			Proves: "#130335 is gone in 1.32.13 (the fix reached 1.32 in 1.32.4) and reproduces on 1.32.2"},
		{Name: "pvc-terminating-bug-between", APIServer: newerControlPlane, Plan: "v1.35.4,v1.32.2,v1.35.4", Scenario: "pvc-terminating",
			Proves: "#130335 reproduces on 1.32.2 between two fixed kubelets, and the fixed 1.35.4 after it is judged too, on the pods re-created with their volumes mounted"},
		{Name: "pvc-terminating-old-path", APIServer: olderControlPlane, Plan: "v1.28.15,v1.26.15", Scenario: "pvc-terminating",
			Proves: "#130335 on the old reconstruction too, on 1.26.15, which never got its fix"},
		{Name: "pvc-terminating-1.28", APIServer: olderControlPlane, Plan: "v1.26.15,v1.28.15", Scenario: "pvc-terminating",
			Proves: "#130335 on 1.28.15's new reconstruction, which never got its fix"},
		{Name: "reboot-old-path", APIServer: olderControlPlane, Plan: "v1.28.15,v1.28.15+NewVolumeManagerReconstruction=false,v1.28.15", Scenario: "reboot", Paths: []string{New, Old, New},
			Proves: "#117513 on the old reconstruction: after a reboot the re-created pods get NodePublish without NodeStage; the new one, in the same binary, stages them"},
		// The kubelet with #106942 keeps the old pods' dirs for good, so
		// it comes last.
		{Name: "reboot-file-subpath", APIServer: olderControlPlane, Plan: "v1.28.5,v1.28.15,v1.28.5", Scenario: "reboot-file-subpath",
			Proves: "#106942 gone in 1.28.15 (the fix reached 1.28 in 1.28.8) and reproduced on 1.28.5: its orphan sweep rmdirs a file subPath's mount point"},
		// With SELinuxMountReadWriteOncePod off; a kubelet with #124057
		// never starts the killed containers again (a hop after it would
		// re-create the pods first).
		{Name: "restart-kill-container", APIServer: olderControlPlane,
			Plan:     "v1.28.5+SELinuxMountReadWriteOncePod=false,v1.28.15+SELinuxMountReadWriteOncePod=false,v1.28.5+SELinuxMountReadWriteOncePod=false",
			Scenario: "restart-kill-container",
			Proves:   "#124057 gone in 1.28.15 (the fix reached 1.28 in 1.28.9) and reproduced on 1.28.5, both with SELinuxMountReadWriteOncePod off: after a restart its pods' volumes read as unmounted, and a killed container is never started again"},
		{Name: "configmap-key-missing-shipped", APIServer: olderControlPlane, Plan: "v1.28.15,v1.26.15,v1.28.15", Scenario: "configmap-key-missing",
			Proves: "#121472 reproduces on 1.26.15 and 1.28.15, which never got its fix"},
		{Name: "configmap-key-missing-fixed", APIServer: newerControlPlane, Plan: "v1.32.13,v1.32.2,v1.32.13", Scenario: "configmap-key-missing",
			Proves: "#121472 is gone on kubelets from 1.30.0, where it was fixed"},
		// The kubelet with #119608 keeps the deleted pod Terminating
		// until a pod maps the volume again, which the fault then makes
		// happen; it comes last all the same.
		{Name: "reboot-block", APIServer: olderControlPlane, Plan: "v1.28.5,v1.28.15,v1.28.5", Scenario: "reboot-block", Paths: []string{New, New, New},
			Proves: "#119608 gone in 1.28.15 (#122211 reached 1.28 in 1.28.6) and reproduced on 1.28.5: after a reboot whose first re-stage of a raw block volume fails, its deleted pod stays Terminating, every unmap failing with \"mapPath is empty\""},
		// 1.28.5's new reconstruction first: the same binary as the one
		// with #119921, clean on the other path.
		{Name: "reboot-shared-volume", APIServer: olderControlPlane,
			Plan:     "v1.28.15,v1.28.5,v1.28.15+NewVolumeManagerReconstruction=false,v1.28.5+NewVolumeManagerReconstruction=false",
			Scenario: "reboot-shared-volume", Paths: []string{New, New, Old, Old},
			Proves: "#119921 on 1.28.5's old reconstruction, gone in 1.28.15's (#119923 reached 1.28 in 1.28.6) and on 1.28.5's new one: after a reboot, a pod whose volume a deleted pod shared gets it published again"},
	}
}

// Label is the run's own Ginkgo label.
func (r Run) Label() string { return Label + "-" + r.Name }

// Check is what the history requires of a run's hop beyond the
// catalogue's verdict.
type Check struct {
	// Kubelet is the hop's kubelet: version and gates, as the plan
	// entry reads.
	Kubelet string
	// Expectation is the catalogue's for the kubelet; Covered is false
	// for the baseline.
	Expectation catalogue.Expectation
	Covered     bool
}

// Checks are, per hop of r, what the catalogue expects of the hop's
// kubelet: a KnownBug there must reproduce.
func (r Run) Checks() ([]Check, error) {
	p, err := plan.Parse(r.Plan)
	if err != nil {
		return nil, fmt.Errorf("history run %s: %w", r.Name, err)
	}
	var e catalogue.Entry
	if r.Scenario != "" {
		var ok bool
		if e, ok = reconstruction.CatalogueEntry(r.Scenario); !ok {
			return nil, fmt.Errorf("history run %s: no catalogue entry %q", r.Name, r.Scenario)
		}
	}
	var out []Check
	for _, h := range p.Hops() {
		c := Check{Kubelet: plan.V(h.To) + plan.FormatGates(h.ToGates)}
		if r.Scenario != "" {
			c.Expectation, c.Covered = e.ExpectationForKubelet(h.To, h.ToGates)
			if !c.Covered {
				return nil, fmt.Errorf("history run %s: catalogue entry %s has no expectation for kubelet %s", r.Name, r.Scenario, c.Kubelet)
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// Validate checks the history's own data: plans that parse and keep the
// skew policy under their control plane, entries that exist and cover
// every hop's kubelet, and one path per plan entry where paths are given.
func Validate(runs []Run) error {
	var errs []string
	names := map[string]bool{}
	for _, r := range runs {
		if names[r.Name] {
			errs = append(errs, "duplicate history run "+r.Name)
		}
		names[r.Name] = true
		p, err := plan.Parse(r.Plan)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", r.Name, err))
			continue
		}
		api, err := version.ParseSemantic(r.APIServer)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: APISERVER %q: %v", r.Name, r.APIServer, err))
			continue
		}
		if err := p.Validate(api); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", r.Name, err))
		}
		if r.Paths != nil && len(r.Paths) != len(p.Versions) {
			errs = append(errs, fmt.Sprintf("%s: %d paths for %d plan entries", r.Name, len(r.Paths), len(p.Versions)))
		}
		if _, err := r.Checks(); err != nil {
			errs = append(errs, err.Error())
		}
		if r.Proves == "" {
			errs = append(errs, r.Name+" says nothing of what it proves")
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("history: %s", strings.Join(errs, "; "))
	}
	return nil
}
