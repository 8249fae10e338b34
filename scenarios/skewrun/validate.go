package skewrun

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/catalogue"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
	"sigs.k8s.io/skewtest/scenarios/kubeletmetrics"
	"sigs.k8s.io/skewtest/scenarios/plan"
	"sigs.k8s.io/skewtest/scenarios/reconstruction"
)

// validated is a run's input once checked: Options with their defaults,
// the parsed plan, the volume kind and one kubelet source per plan entry.
type validated struct {
	Options    Options
	Plan       plan.Plan
	VolumeKind storage.Kind
	// APIServer is the control plane version of a cluster the provider
	// creates: APISERVER, or the plan's newest. Nil for a provider that
	// attaches to a cluster, whose API server is read after Up.
	APIServer *version.Version
	// Specs are the kubelet binary specs (binaries.ParseSpec), one per
	// plan entry.
	Specs []string
	// ArtifactsRoot is the absolute artifacts root; each run writes into
	// <ArtifactsRoot>/<run-id>.
	ArtifactsRoot string
	// Fault is the catalogue fault of Options.Scenario, nil for the
	// baseline.
	Fault *reconstruction.Fault
	// Shapes are the catalogue shapes of Options.Scenario (a shape, or a
	// comma-separated list of shapes planted in one workload).
	Shapes []reconstruction.Shape
}

// Defaults of Options.
const (
	defaultReplicas  = 3
	defaultArtifacts = "_artifacts"
)

// Floors of the scenario's waits (POLL_INTERVAL, CLEANUP_TIMEOUT).
const (
	// minPollInterval: each poll reads the node's mountinfo and lists the
	// API; polling faster sees nothing sooner and only loads the node
	// under test.
	minPollInterval = 50 * time.Millisecond
	// minCleanupTimeout: the kubelet's volume manager reconciler and its
	// pod cleanup need several seconds after it starts before they act; a
	// shorter bound would report every hop as a kubelet regression.
	minCleanupTimeout = 15 * time.Second
)

// Check checks o as Run does before it makes anything, and returns o with
// its defaults filled in (PROVIDER, PLAN, REPLICAS, the cache, CSI_MODE,
// and ARTIFACTS as an absolute path).
// It creates nothing but the artifacts root. Every error wraps
// exitcode.ErrInvalid and names the setting and the fix.
func (o Options) Check() (Options, error) {
	v, err := validate(o)
	if err != nil {
		return o, err
	}
	v.Options.ArtifactsDir = v.ArtifactsRoot
	return v.Options, nil
}

// validate checks o and fills in its defaults; it creates nothing but the
// artifacts root, which it tries for writing last, so that a run that
// could not keep its reports is refused before it makes anything else.
// Every error wraps exitcode.ErrInvalid and names the setting and the fix. A
// provider that creates its cluster runs the API server at the plan's
// newest version, so the plan is checked against that here; an existing
// cluster's plan is checked against its API server after Up.
func validate(o Options) (*validated, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	o.Provider = defaultStr(o.Provider, clusters.Default().Name)
	o.Plan = defaultStr(o.Plan, plan.Default)
	if o.Replicas <= 0 {
		o.Replicas = defaultReplicas
	}
	if o.CacheDir == "" {
		o.CacheDir = binaries.DefaultCacheDir()
	}
	if err := binaries.CheckCacheDir(o.CacheDir); err != nil {
		return nil, fmt.Errorf("%w: SKEWTEST_CACHE: %w", exitcode.ErrInvalid, err)
	}
	if err := validateWaits(o); err != nil {
		return nil, err
	}
	kind, err := storage.ParseKind(defaultStr(o.VolumeKind, string(storage.CSI)))
	if err != nil {
		return nil, fmt.Errorf("%w: VOLUME_KIND: %v", exitcode.ErrInvalid, err)
	}
	pl, err := plan.Parse(o.Plan)
	if err != nil {
		return nil, fmt.Errorf("%w: PLAN=%s: %v", exitcode.ErrInvalid, o.Plan, err)
	}
	// An unknown provider is refused below, after the plan's own errors.
	var api *version.Version
	if d, err := clusters.Lookup(o.Provider); err != nil || d.CreatesCluster {
		if api, err = apiServerVersion(o.APIServer, pl); err != nil {
			return nil, err
		}
		if err := pl.Validate(api); err != nil {
			if o.APIServer != "" {
				return nil, fmt.Errorf("%w: PLAN=%s under APISERVER=%s: %v", exitcode.ErrInvalid, o.Plan, o.APIServer, err)
			}
			return nil, fmt.Errorf("%w: PLAN=%s: %v", exitcode.ErrInvalid, o.Plan, err)
		}
	} else if o.APIServer != "" {
		return nil, fmt.Errorf("%w: APISERVER=%s: PROVIDER=%s attaches to a cluster and runs the plan against that cluster's own API server; unset APISERVER", exitcode.ErrInvalid, o.APIServer, o.Provider)
	}
	if err := checkGates(pl, o.Provider); err != nil {
		return nil, fmt.Errorf("%w: PLAN=%s: %v", exitcode.ErrInvalid, o.Plan, err)
	}
	// Each hop's metrics are judged by what its kubelet's version
	// registers: a version the table lacks is refused now, not after
	// the builds and the first hop.
	for _, v := range pl.Distinct() {
		if err := kubeletmetrics.KnownKubelet("v" + v.String()); err != nil {
			return nil, fmt.Errorf("%w: PLAN=%s: %v", exitcode.ErrInvalid, o.Plan, err)
		}
	}
	specs, err := kubeletSpecs(pl, o)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", exitcode.ErrInvalid, err)
	}
	for i, s := range specs {
		if _, err := binaries.ParseSpec(s); err != nil {
			return nil, fmt.Errorf("%w: plan entry %d: %v", exitcode.ErrInvalid, i+1, err)
		}
	}
	shapes, err := validateShapes(&o)
	if err != nil {
		return nil, err
	}
	// Unknown providers fail here, before binaries are built.
	// The one construction the provider is made from (clusterOptions),
	// so that the checks see exactly what New will get.
	if err := (&validated{Options: o, Plan: pl, APIServer: api}).checkProvider(nil); err != nil {
		return nil, fmt.Errorf("%w: PROVIDER=%s: %v", exitcode.ErrInvalid, o.Provider, err)
	}
	var fault *reconstruction.Fault
	if o.Scenario != "" && shapes == nil {
		f, err := reconstruction.LookupFault(o.Scenario)
		if err != nil {
			return nil, fmt.Errorf("%w: SCENARIO=%s: %v", exitcode.ErrInvalid, o.Scenario, err)
		}
		if !runsOn(f.Entry, o.Provider) {
			return nil, fmt.Errorf("%w: SCENARIO=%s runs on %s, not PROVIDER=%s; choose one of those providers", exitcode.ErrInvalid, o.Scenario, strings.Join(clusters.RunningOn(f.Entry.Needs), ", "), o.Provider)
		}
		fault = &f
	}
	root := defaultStr(o.ArtifactsDir, defaultArtifacts)
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
	}
	if err := ownedRoot(root); err != nil {
		return nil, fmt.Errorf("%w: ARTIFACTS=%s: %v; set ARTIFACTS to a directory of yours (under your home, or a new one you made with mkdir -m 0700)", exitcode.ErrInvalid, root, err)
	}
	if err := probeWritable(root); err != nil {
		return nil, fmt.Errorf("%w: ARTIFACTS=%s: the run could not write its reports there: %v; point ARTIFACTS at a directory you can write (it is created if missing)", exitcode.ErrInvalid, root, err)
	}
	return &validated{Options: o, Plan: pl, APIServer: api, VolumeKind: kind, Specs: specs, ArtifactsRoot: root, Fault: fault, Shapes: shapes}, nil
}

// validateWaits refuses a poll interval or cleanup bound below its floor
// (0 is the default).
func validateWaits(o Options) error {
	if o.PollInterval != 0 && o.PollInterval < minPollInterval {
		return fmt.Errorf("%w: POLL_INTERVAL=%s is below the floor of %s: each poll reads the node's mountinfo and lists the API, so polling faster only loads the node under test; set POLL_INTERVAL=%s or more, or leave it unset", exitcode.ErrInvalid, o.PollInterval, minPollInterval, minPollInterval)
	}
	if o.CleanupTimeout != 0 && o.CleanupTimeout < minCleanupTimeout {
		return fmt.Errorf("%w: CLEANUP_TIMEOUT=%s is below the floor of %s: the kubelet's volume manager reconciler and pod cleanup need several seconds after it starts, so a shorter bound would report every hop as a kubelet regression (exit 1); set CLEANUP_TIMEOUT=%s or more, or leave it unset", exitcode.ErrInvalid, o.CleanupTimeout, minCleanupTimeout, minCleanupTimeout)
	}
	return nil
}

// ownedRoot refuses an artifacts root another user could have made or
// could replace: one in a directory others can write (./_artifacts from
// /tmp), unless it exists already as a directory of this user's that
// only it can write. skewtest runs as root; its reports must not go into
// a directory or through a symbolic link another user planted.
func ownedRoot(root string) error {
	parent := filepath.Dir(root)
	pfi, err := os.Stat(parent)
	if err != nil {
		return nil // probeWritable says what is wrong with it
	}
	if pfi.Mode().Perm()&0o022 == 0 {
		return nil
	}
	fi, err := os.Lstat(root)
	if err != nil {
		return fmt.Errorf("it would be made in %s, which other users can write (%s), so another user could have made it first", parent, pfi.Mode().Perm())
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("it is in %s, which other users can write (%s), and is not a directory of yours that only you can write", parent, pfi.Mode().Perm())
	}
	return nil
}

// probeWritable checks that dir can take files: it creates dir (and its
// missing parents) and writes and removes a probe file. The directory
// stays: the run writes its reports there, and removing it could pull it
// from under a concurrent run given the same root.
func probeWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".skewtest-write-probe-")
	if err != nil {
		return err
	}
	_, werr := f.Write([]byte("probe\n"))
	cerr := f.Close()
	rerr := os.Remove(f.Name())
	return errors.Join(werr, cerr, rerr)
}

// validateShapes resolves SCENARIO when it names catalogue shapes (one,
// or several separated by commas, planted in one workload) and picks the
// CSI driver mode they need, or a fault's own shapes need: raw block
// volumes need CSI_MODE=ebs, which is chosen when CSI_MODE is unset. nil
// when SCENARIO names no shape.
func validateShapes(o *Options) ([]reconstruction.Shape, error) {
	if o.Scenario == "" {
		return nil, nil
	}
	names := strings.Split(o.Scenario, ",")
	if _, ok := reconstruction.Shapes()[names[0]]; !ok && len(names) == 1 {
		// A fault (or a name Validate refuses below).
		f, err := reconstruction.LookupFault(o.Scenario)
		if err != nil {
			return nil, nil
		}
		shapes, err := reconstruction.LookupShapes(f.Shapes)
		if err != nil {
			return nil, fmt.Errorf("%w: SCENARIO=%s: %v", exitcode.ErrInvalid, o.Scenario, err)
		}
		return nil, chooseCSIMode(o, shapes)
	}
	shapes, err := reconstruction.LookupShapes(names)
	if err != nil {
		return nil, fmt.Errorf("%w: SCENARIO=%s: %v", exitcode.ErrInvalid, o.Scenario, err)
	}
	for _, sh := range shapes {
		if !runsOn(sh.Entry, o.Provider) {
			return nil, fmt.Errorf("%w: SCENARIO=%s: shape %s runs on %s, not PROVIDER=%s; choose one of those providers or leave the shape out", exitcode.ErrInvalid, o.Scenario, sh.Entry.Name, strings.Join(clusters.RunningOn(sh.Entry.Needs), ", "), o.Provider)
		}
	}
	return shapes, chooseCSIMode(o, shapes)
}

// chooseCSIMode sets CSI_MODE=ebs when one of shapes needs raw block
// volumes and CSI_MODE is unset, and refuses another mode.
func chooseCSIMode(o *Options, shapes []reconstruction.Shape) error {
	for _, sh := range shapes {
		if !sh.Block {
			continue
		}
		switch o.CSIMode {
		case "":
			o.CSIMode = clusters.CSIModeEBS
		case clusters.CSIModeEBS:
		default:
			return fmt.Errorf("%w: SCENARIO=%s: shape %s needs raw block volumes, which skewtest's CSI driver serves in CSI_MODE=%s, not CSI_MODE=%s; set CSI_MODE=%s or leave it unset", exitcode.ErrInvalid, o.Scenario, sh.Entry.Name, clusters.CSIModeEBS, o.CSIMode, clusters.CSIModeEBS)
		}
	}
	return nil
}

// NewRun starts the report of a run of v's plan that started at start,
// listing its kubelets.
func (v *validated) NewRun(start time.Time, kubelets []binaries.Binary) *reports.Run {
	id := reports.NewRunID(start)
	scenario := reports.ReconstructionScenarioPrefix + string(v.VolumeKind)
	if v.Fault != nil {
		scenario = reports.CatalogueScenarioPrefix + v.Fault.Entry.Name
	}
	if v.Shapes != nil {
		scenario = reports.CatalogueScenarioPrefix + strings.Join(shapeNames(v.Shapes), ",")
	}
	run := &reports.Run{ID: id, Scenario: scenario, Provider: v.Options.Provider, Plan: v.Plan.Raw,
		Started: start, ArtifactsDir: filepath.Join(v.ArtifactsRoot, id)}
	for _, k := range kubelets {
		run.Binaries = appendBinary(run.Binaries, k)
	}
	return run
}

// apiServerVersion is APISERVER parsed ("v1.28.15" or "1.28.15"), or the
// plan's newest when it is empty.
func apiServerVersion(s string, pl plan.Plan) (*version.Version, error) {
	if s == "" {
		return pl.Newest(), nil
	}
	v, err := version.ParseSemantic(strings.TrimPrefix(strings.TrimSpace(s), "v"))
	if err != nil {
		return nil, fmt.Errorf("%w: APISERVER=%s: not a release version: %v; give one such as v1.28.15, or leave it empty for the plan's newest", exitcode.ErrInvalid, s, err)
	}
	return v, nil
}

// kubeletSpecs gives one binary spec per plan entry: KUBELETS as given, or
// the plan's versions from KUBELET_SOURCE. A bare version in KUBELETS
// (v1.37.2) comes from KUBELET_SOURCE as a PLAN version does: the same
// words mean the same kubelet in both; release:v1.37.2 downloads.
func kubeletSpecs(pl plan.Plan, o Options) ([]string, error) {
	if len(o.Kubelets) > 0 {
		if len(o.Kubelets) != len(pl.Versions) {
			return nil, fmt.Errorf("KUBELETS has %d entries for a plan of %d versions; give one per plan entry", len(o.Kubelets), len(pl.Versions))
		}
		specs := make([]string, len(o.Kubelets))
		for i, k := range o.Kubelets {
			specs[i] = k
			if v, ok := binaries.BareVersion(k); ok {
				s, err := sourceSpec(o.KubeletSource, v)
				if err != nil {
					return nil, err
				}
				specs[i] = s
			}
		}
		return specs, nil
	}
	specs := make([]string, len(pl.Versions))
	for i, v := range pl.Versions {
		s, err := sourceSpec(o.KubeletSource, v)
		if err != nil {
			return nil, err
		}
		specs[i] = s
	}
	return specs, nil
}

// sourceSpec is the binary spec of kubelet v from KUBELET_SOURCE.
func sourceSpec(source string, v *version.Version) (string, error) {
	switch defaultStr(source, "module") {
	case "module":
		return "module:v" + v.String(), nil
	case "release":
		return "release:v" + v.String(), nil
	case "kindest":
		return "image:" + binaries.KindNodeImage(v), nil
	}
	return "", fmt.Errorf("KUBELET_SOURCE=%q: want module (build from the Go module), release (download from dl.k8s.io) or kindest (extract from the kindest/node image of each version)", source)
}

func appendBinary(list []reports.Binary, b binaries.Binary) []reports.Binary {
	rb := reports.Binary{Component: b.Component, Version: b.Version, Source: b.Source, SHA256: b.SHA256, BuildTags: b.BuildTags,
		PatchSHA256: b.PatchSHA256, PatchFiles: b.PatchFiles}
	for _, x := range list {
		if x == rb {
			return list
		}
	}
	return append(list, rb)
}

func defaultStr(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func defaultDur(v, d time.Duration) time.Duration {
	if v == 0 {
		return d
	}
	return v
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// shapeNames are the shapes' catalogue names, in order.
func shapeNames(shapes []reconstruction.Shape) []string {
	var out []string
	for _, sh := range shapes {
		out = append(out, sh.Entry.Name)
	}
	return out
}

// runsOn reports whether catalogue entry e runs on the named provider: its
// nodes have every capability e needs. An unknown provider has none; the
// provider check names it.
func runsOn(e catalogue.Entry, provider string) bool {
	d, _ := clusters.Lookup(provider)
	return e.RunsOn(d.NodeCapabilities)
}

// checkGates refuses a plan whose entries set kubelet feature gates on a
// provider whose nodes cannot give them to their kubelets, saying why
// (its descriptor's GatesRefused) and naming those that can.
func checkGates(pl plan.Plan, provider string) error {
	d, err := clusters.Lookup(provider)
	if err != nil || d.GatesRefused == "" {
		return nil
	}
	return pl.CheckGatesOn(provider, d.GatesRefused, clusters.RunningOn([]nodes.Capability{nodes.KubeletFeatureGates}))
}
