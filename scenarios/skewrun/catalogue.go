package skewrun

import (
	"strings"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/plan"
	"sigs.k8s.io/skewtest/scenarios/reconstruction"
)

// CatalogueJobs are the catalogue's runs on o's provider, as a batch's
// jobs with o's settings: one per fault that runs there, then the shapes
// that run there planted in one workload per CSI driver mode they need
// (reconstruction.ShapeGroups); each with catalogue.Replicas pods, on o's PLAN or the
// default. The sign-off plans' shapes (csi-filesystem, local-volume) are
// the baseline runs, not among them.
func (o Options) CatalogueJobs() []Job {
	provider := defaultStr(o.Provider, clusters.Default().Name)
	var jobs []Job
	var shapes []string
	for _, e := range reconstruction.Catalogue() {
		if !runsOn(e, provider) {
			continue
		}
		if _, ok := reconstruction.Shapes()[e.Name]; ok {
			shapes = append(shapes, e.Name)
			continue
		}
		if _, err := reconstruction.LookupFault(e.Name); err == nil {
			jobs = append(jobs, catalogueJob(o, string(e.Kind)+" "+e.Name, e.Name))
		}
	}
	plain, block := reconstruction.ShapeGroups(shapes)
	for _, g := range [][]string{plain, block} {
		if len(g) > 0 {
			jobs = append(jobs, catalogueJob(o, "shapes "+strings.Join(g, ", "), strings.Join(g, ",")))
		}
	}
	return jobs
}

// catalogueJob is the catalogue run named name of scenario.
func catalogueJob(o Options, name, scenario string) Job {
	o.Scenario, o.Replicas = scenario, catalogue.Replicas
	o.Plan = defaultStr(o.Plan, plan.Default)
	return Job{Name: name, Options: o}
}
