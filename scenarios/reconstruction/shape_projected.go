package reconstruction

// This file checks the projected-secret-configmap shape: the re-created
// pod's secret, configMap and projected volumes and their contents.

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/scenarios"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/nodestate"
)

var _ = addShape(catalogue.Entry{
	Name:   "projected-secret-configmap",
	Plants: "a configMap, a secret and a projected (configMap + secret + downward API metadata.uid) volume",
	Checks: "the old UID's secret and projected tmpfs mounts and configMap dir gone; the new pod's secret and projected volumes are tmpfs mounts, its configMap volume a dir, every file holds the API objects' contents and the projected uid file the new UID",
	Expect: []catalogue.Expectation{{Outcome: catalogue.Clean, Says: "reconstructed and cleaned (every pod's kube-api-access projected volume already is)"}},
	Needs:  shapeNeeds,
}, Shape{owns: []string{"kubernetes.io~secret/" + secVolume, "kubernetes.io~configmap/" + cfgVolume, "kubernetes.io~projected/" + projVolume}, check: checkProjected})

// checkProjected: the re-created pod's secret and projected volumes are
// tmpfs mounts, its configMap volume a plain dir, each with the objects'
// contents, and the projected downward API file names the new UID.
func checkProjected(ctx context.Context, s *Scenario, sc *scenarios.StepContext, _ *version.Version) (catalogue.Observation, error) {
	pods, snap, err := s.newPods(ctx, sc)
	if err != nil {
		return catalogue.Observation{}, err
	}
	cfg, sec := shapeObjectsData(s.cfg.Namespace)
	var fine []string
	for _, p := range pods {
		dir := func(plugin, vol string) string {
			return fmt.Sprintf("pods/%s/volumes/kubernetes.io~%s/%s", p.UID, plugin, vol)
		}
		if err := checkMounted(snap, p, dir("secret", secVolume), "tmpfs"); err != nil {
			return catalogue.Observation{}, err
		}
		if err := checkMounted(snap, p, dir("projected", projVolume), "tmpfs"); err != nil {
			return catalogue.Observation{}, err
		}
		if e, ok := snap.Lookup(dir("configmap", cfgVolume)); !ok || e.Type != nodestate.TypeDir {
			return catalogue.Observation{}, fmt.Errorf("pod %s (uid %s): configMap volume dir %s missing", p.Name, p.UID, snap.Abs(dir("configmap", cfgVolume)))
		}
		want := map[string]string{
			dir("configmap", cfgVolume) + "/" + cfgKey:     cfg[cfgKey],
			dir("secret", secVolume) + "/" + secretKey:     sec[secretKey],
			dir("projected", projVolume) + "/" + cfgKey:    cfg[cfgKey],
			dir("projected", projVolume) + "/" + secretKey: sec[secretKey],
			dir("projected", projVolume) + "/" + uidKey:    string(p.UID),
		}
		var files []string
		for f := range want {
			files = append(files, f)
		}
		sort.Strings(files)
		for _, f := range files {
			res, err := exec.Output(ctx, sc.Node, "cat", snap.Abs(f))
			if err != nil {
				return catalogue.Observation{}, fmt.Errorf("pod %s (uid %s): %w", p.Name, p.UID, err)
			}
			if res.Stdout != want[f] {
				return catalogue.Observation{}, fmt.Errorf("pod %s (uid %s): %s holds %q, want %q", p.Name, p.UID, snap.Abs(f), res.Stdout, want[f])
			}
		}
		fine = append(fine, fmt.Sprintf("pod %s uid %s: secret and projected volumes mounted (tmpfs), configMap dir present, %d files with the objects' contents (the projected %s is the new UID)", p.Name, p.UID, len(files), uidKey))
	}
	return catalogue.Observation{Detail: strings.Join(fine, "; ")}, nil
}
