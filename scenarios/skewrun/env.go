package skewrun

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/skewtest/clusters"
	"sigs.k8s.io/skewtest/clusters/registry"
	"sigs.k8s.io/skewtest/clusters/timeouts"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
	"sigs.k8s.io/skewtest/scenarios/matrix"
	"sigs.k8s.io/skewtest/scenarios/plan"
)

// sharedSettings are the environment variables `make test-skew`, the suite and
// `skewtest run` read for every provider, with what each means; each
// provider's own are its descriptor's (clusters.Providers, AllSettings).
// docs/settings.md is generated from AllSettings (ci/docs_test.go).
var sharedSettings = []clusters.Setting{
	{Name: "PROVIDER", Default: clusters.Default().Name, Help: providerHelp()},
	{Name: "CSI_MODE", Default: clusters.CSIModeTmpfs, Help: "the mode of skewtest's CSI driver: tmpfs (tmpfs staged, bind published, no attach; fast) or ebs (loop devices over sparse files, ext4 or raw block, attached through VolumeAttachments by the external-attacher; " + strings.Join(csiModeProviders(clusters.CSIModeEBS), ", ") + " only)"},
	{Name: "PLAN", Default: plan.Default, Help: "kubelet versions in hop order; the node starts at the first"},
	{Name: "APISERVER", Default: "the plan's newest", Help: "the kube-apiserver, controller-manager and scheduler version of a cluster the provider creates; at least the plan's newest minor, and within the skew policy of every entry (n-3 from 1.28, n-2 before)"},
	{Name: "MATRIX", Default: matrix.Default, Help: "make test-matrix: kubelet versions whose every (from, to) pair the tour visits once, on one cluster at the newest"},
	{Name: "MATRIX_NODES", Default: fmt.Sprint(matrix.DefaultNodes), Help: "make test-matrix: nodes that run the tour's trails at once (1: one node runs the whole tour)"},
	{Name: "BATCH_NODES", Default: fmt.Sprint(defaultBatchNodes), Help: "make test-skew, skewtest catalogue: nodes of one cluster that run the suite's sign-off plans and catalogue entries at once, longest first, each in its own namespace with its own report (capped at what the provider makes: " + strings.Join(nodeCaps(), ", ") + ")"},
	{Name: "SCENARIO", Help: "a catalogue fault each hop plants, or catalogue shapes (one, or several separated by commas) planted in one workload; the block shape picks CSI_MODE=ebs (go run ./cmd/skewtest scenarios lists them, with where each runs); empty: the baseline force-delete"},
	{Name: "REPLICAS", Default: "3", Help: "StatefulSet replicas, one PVC each, all on the test node (a matrix tour's trails: 1 unless set; catalogue faults: 1)"},
	{Name: "VOLUME_KIND", Default: "csi", Help: "csi (CSI volumes: skewtest's CSI driver, or the StorageClass of a provider whose volumes are the cluster's) or local (local-volume PVs)"},
	{Name: "KUBELET_SOURCE", Default: "module", Help: "where the kubelet of each PLAN version, and of each bare version in KUBELETS, comes from: module (build from the k8s.io/kubernetes Go module), release (download from dl.k8s.io, sha256-checked) or kindest (extract /usr/bin/kubelet from the kindest/node:<version> image on Docker Hub)"},
	{Name: "KUBELETS", Help: "one binary spec per plan entry, overriding KUBELET_SOURCE: vX.Y.Z (from KUBELET_SOURCE, as a PLAN version), release:vX.Y.Z (a download), module:vX.Y.Z, patch:/path/fix.diff@vX.Y.Z (module:vX.Y.Z with a git diff of a kubernetes checkout applied), file:/path, checkout:/path, image:<ref>, latest-X.Y, ci/latest-X.Y"},
	{Name: "RELEASE_BASE_URL", Default: "https://dl.k8s.io", Help: "mirror for release downloads"},
	{Name: "ARTIFACTS", Default: "./_artifacts/<run-id>", Help: "where reports, JUnit and logs go; created if missing, and tried for writing before anything is made"},
	{Name: "KEEP_CLUSTER_ON_FAILURE", Default: "false", Help: "leave a failed cluster up and print how to reach and remove it"},
	{Name: "SKEWTEST_CACHE", Default: "$HOME/.cache/skewtest", Help: "binary cache (never in the repository)"},
	{Name: "POLL_INTERVAL", Default: "250ms", Help: "how often node state is read while waiting; at least " + minPollInterval.String() + " (each poll reads the node's mountinfo and lists the API)"},
	{Name: "CLEANUP_TIMEOUT", Default: "3m", Help: "how long the kubelet gets to clean up after each hop; at least " + minCleanupTimeout.String() + " (its volume manager and pod cleanup need seconds after it starts)"},
	{Name: "SKEWTEST_TIMEOUT_FACTOR", Default: "1", Help: "multiplies the providers' start timeouts and the scenario's waits (1 to 100), for emulated guests such as make test-hosts under TCG"},
	{Name: "MUTANTS", Help: "make test-mutants, skewtest mutants: the mutants of the kubelet to run, comma-separated names of scenarios/mutation/mutants (default: all of them)"},
	{Name: "DRY_RUN", Default: "true", Help: "make janitor-aws: list expired skewtest resources; DRY_RUN=false deletes them"},
}

// AllSettings are sharedSettings followed by each provider's own
// (its descriptor's), each of those with the provider's name before its
// meaning: the table `skewtest settings` prints and docs/settings.md is
// generated from.
func AllSettings() []clusters.Setting {
	out := slices.Clone(sharedSettings)
	for _, d := range clusters.Providers() {
		for _, s := range d.Settings {
			s.Help = d.Name + ": " + s.Help
			out = append(out, s)
		}
	}
	return out
}

// providerHelp is PROVIDER's meaning: each provider's name and what it
// runs on.
func providerHelp() string {
	var parts []string
	for _, d := range clusters.Providers() {
		parts = append(parts, fmt.Sprintf("%s (%s)", d.Name, d.Help))
	}
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1]
}

// csiModeProviders are the providers that run skewtest's CSI driver in
// mode.
// nodeCaps are "provider N" for each provider with a limit on its test
// nodes (Descriptor.MaxTestNodes), from the descriptors.
func nodeCaps() []string {
	var out []string
	for _, d := range clusters.Providers() {
		if d.MaxTestNodes > 0 {
			out = append(out, fmt.Sprintf("%s %d", d.Name, d.MaxTestNodes))
		}
	}
	return out
}

func csiModeProviders(mode string) []string {
	var out []string
	for _, d := range clusters.Providers() {
		if slices.Contains(d.CSIModes, mode) {
			out = append(out, d.Name)
		}
	}
	return out
}

// OptionsFromEnv reads Options from environment variables (see sharedSettings).
func OptionsFromEnv(getenv func(string) string) (Options, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	o := Options{
		Provider:       getenv("PROVIDER"),
		Plan:           getenv("PLAN"),
		APIServer:      getenv("APISERVER"),
		Matrix:         getenv("MATRIX"),
		VolumeKind:     getenv("VOLUME_KIND"),
		KubeletSource:  getenv("KUBELET_SOURCE"),
		ReleaseBaseURL: getenv("RELEASE_BASE_URL"),
		ArtifactsDir:   getenv("ARTIFACTS"),
		CacheDir:       getenv("SKEWTEST_CACHE"),
		Scenario:       getenv("SCENARIO"),
		CSIMode:        getenv("CSI_MODE"),
	}
	if v := getenv("KUBELETS"); v != "" {
		o.Kubelets = registry.List(v)
	}
	var err error
	if v := getenv("REPLICAS"); v != "" {
		if o.Replicas, err = strconv.Atoi(v); err != nil || o.Replicas < 1 || o.Replicas > 50 {
			return o, fmt.Errorf("%w: REPLICAS=%q: want a number from 1 to 50", exitcode.ErrInvalid, v)
		}
	}
	if v := getenv("MATRIX_NODES"); v != "" {
		if o.MatrixNodes, err = strconv.Atoi(v); err != nil || o.MatrixNodes < 1 || o.MatrixNodes > maxMatrixNodes {
			return o, fmt.Errorf("%w: MATRIX_NODES=%q: want a number from 1 to %d", exitcode.ErrInvalid, v, maxMatrixNodes)
		}
	}
	if v := getenv("BATCH_NODES"); v != "" {
		if o.BatchNodes, err = strconv.Atoi(v); err != nil || o.BatchNodes < 1 || o.BatchNodes > maxBatchNodes {
			return o, fmt.Errorf("%w: BATCH_NODES=%q: want a number from 1 to %d", exitcode.ErrInvalid, v, maxBatchNodes)
		}
	}
	if v := getenv("KEEP_CLUSTER_ON_FAILURE"); v != "" {
		if o.KeepClusterOnFailure, err = strconv.ParseBool(v); err != nil {
			return o, fmt.Errorf("%w: KEEP_CLUSTER_ON_FAILURE=%q: want true or false", exitcode.ErrInvalid, v)
		}
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{{"POLL_INTERVAL", &o.PollInterval}, {"CLEANUP_TIMEOUT", &o.CleanupTimeout}} {
		if v := getenv(d.name); v != "" {
			if *d.dst, err = time.ParseDuration(v); err != nil || *d.dst <= 0 {
				return o, fmt.Errorf("%w: %s=%q: want a duration such as 250ms or 3m", exitcode.ErrInvalid, d.name, v)
			}
		}
	}
	if o.TimeoutFactor, err = timeouts.Parse(getenv(timeouts.FactorEnv)); err != nil {
		return o, fmt.Errorf("%w: %w", exitcode.ErrInvalid, err)
	}
	// Every provider's settings are read, and a malformed one refused,
	// whichever provider is chosen, as when they were fields of Options:
	// a typo shows before the user switches providers. The chosen
	// provider's travel with the run; an unknown PROVIDER has none, and
	// Validate says so.
	for _, d := range clusters.Providers() {
		s, err := d.FromEnv(getenv)
		if err != nil {
			return o, fmt.Errorf("%w: %w", exitcode.ErrInvalid, err)
		}
		if d.Name == defaultStr(o.Provider, clusters.Default().Name) {
			o.ProviderSettings = s
		}
	}
	return o, nil
}
