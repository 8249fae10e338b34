package mutation

import (
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/plan"
	"sigs.k8s.io/skewtest/scenarios/skewrun"
)

// Placement is where a mutant's kubelet runs in a plan of the base
// version (the newest the mutants are made of) and its partner (the one
// the default plan hops to).
type Placement struct {
	Name string
	// Says what the placement proves.
	Says string
	// at is the plan entry that runs the kubelet under test.
	at int
	// versions are the plan's versions; the kubelet under test is of
	// base.
	versions func(base, partner string) []string
}

// Placements are the two a mutant runs in: as a plan's upgrade target,
// where it starts on what an older kubelet left, and in a plan's middle,
// where a clean kubelet starts on what it left.
var Placements = []Placement{
	{Name: "upgrade-target", Says: "the mutant is the upgrade target: base → partner → mutant, starting on what the older kubelet left", at: 2,
		versions: func(base, partner string) []string { return []string{base, partner, base} }},
	{Name: "middle", Says: "the mutant is in the middle: partner → mutant → partner, where a clean kubelet starts on what the mutant left", at: 1,
		versions: func(base, partner string) []string { return []string{partner, base, partner} }},
}

// Versions are the base (the newest version of the default plan: the
// kubelet the mutants change) and its partner (the other).
func Versions() (base, partner string, err error) {
	pl, err := plan.Parse(plan.Default)
	if err != nil {
		return "", "", err
	}
	d := pl.Distinct()
	if len(d) != 2 {
		return "", "", fmt.Errorf("the default plan %s has %d versions; mutation testing wants two", plan.Default, len(d))
	}
	base = "v" + pl.Newest().String()
	for _, v := range d {
		if "v"+v.String() != base {
			partner = "v" + v.String()
		}
	}
	return base, partner, nil
}

// Plan is the placement's PLAN and KUBELETS for the kubelet spec under
// test: the other entries are module builds of their versions, so that
// the only thing that differs from the control's runs is that kubelet.
func (p Placement) Plan(base, partner, spec string) (string, []string) {
	vs := p.versions(base, partner)
	specs := make([]string, len(vs))
	for i, v := range vs {
		specs[i] = "module:" + v
	}
	specs[p.at] = spec
	return strings.Join(vs, ","), specs
}

// Kubelet is one kubelet under test: the control or a mutant.
type Kubelet struct {
	// Name is "control" or the mutant's.
	Name string
	// Spec is its binary source (patch:<file>@<base>).
	Spec string
	// Mutant is nil for the control.
	Mutant *Mutant
}

// ControlName names the unmutated control's row.
const ControlName = "control"

// Entry is one run of the catalogue in each placement: a catalogue job
// (skewrun.Options.CatalogueJobs) or the sign-off's baseline force-delete.
type Entry struct {
	// Name is the entry's, or "shapes" for the shapes planted in one
	// workload.
	Name string
	// Covers are the catalogue entries the run plants.
	Covers []string
	Job    skewrun.Job
}

// Entries are the runs each kubelet under test gets in each placement:
// the baseline force-delete of the sign-off's CSI workload, then the
// catalogue's jobs on o's provider.
func Entries(o skewrun.Options) []Entry {
	base := o
	base.Scenario, base.Replicas, base.VolumeKind = "", catalogue.Replicas, "csi"
	out := []Entry{{Name: "csi-filesystem", Covers: []string{"csi-filesystem"}, Job: skewrun.Job{Name: "shape csi-filesystem", Options: base}}}
	for _, j := range o.CatalogueJobs() {
		covers := strings.Split(j.Options.Scenario, ",")
		name := j.Options.Scenario
		if len(covers) > 1 {
			name = "shapes"
		}
		out = append(out, Entry{Name: name, Covers: covers, Job: j})
	}
	return out
}

// Jobs are the batch's jobs: every entry, for each kubelet under test in
// each placement. A mutant's jobs in one placement are one group, which
// stops at its first kill; the entries it names as its killers go first.
// The control's jobs have no group: every one of them runs.
func Jobs(base, partner string, kubelets []Kubelet, entries []Entry) []skewrun.Job {
	var jobs []skewrun.Job
	for _, k := range kubelets {
		for _, p := range Placements {
			pl, specs := p.Plan(base, partner, k.Spec)
			for _, e := range entries {
				j := e.Job
				j.Options.Plan, j.Options.Kubelets = pl, specs
				j.Name = JobName(k.Name, p.Name, e.Name)
				if k.Mutant != nil {
					j.Group = k.Name + " " + p.Name
					j.Rank = rank(*k.Mutant, e)
				}
				jobs = append(jobs, j)
			}
		}
	}
	return jobs
}

// JobName names one run of the batch.
func JobName(kubelet, placement, entry string) string {
	return kubelet + " " + placement + " " + entry
}

// rank puts the runs of the entries a mutant names as its killers first
// (0), then the others (1).
func rank(m Mutant, e Entry) int {
	for _, c := range e.Covers {
		if slices.Contains(m.Killers, c) {
			return 0
		}
	}
	return 1
}
