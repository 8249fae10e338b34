package skewrun

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/skewtest/clusters/existing"
	"sigs.k8s.io/skewtest/clusters/kops"
	"sigs.k8s.io/skewtest/clusters/timeouts"
	"sigs.k8s.io/skewtest/scenarios/matrix"
)

// Settings are the environment variables `make test-skew`, the suite and
// `skewtest run` read, with what each means; docs/settings.md is generated from it (ci/docs_test.go).
var Settings = []struct{ Name, Default, Help string }{
	{"PROVIDER", "local", "local (a real cluster on this Linux host), kind (kind with an offline node image), existing (KUBECONFIG plus SSH) or kops (a kops cluster on AWS with the EBS CSI driver)"},
	{"KIND_NODE_IMAGE", "", "kind: offline (build locally; the default where a private dockerd is needed), upstream (kindest/node at the API server's version; the default on a normal Docker host) or an image reference"},
	{"KIND_CSI", "", "kind: skewtest (skewtest's own CSI node plugin, built here; the default with the offline node image) or hostpath (the upstream CSI hostpath driver from registry.k8s.io; the default with a pulled node image)"},
	{"CSI_MODE", "tmpfs", "local: the mode of skewtest's CSI driver: tmpfs (tmpfs staged, bind published, no attach; fast) or ebs (loop devices over sparse files, ext4 or raw block, attached through VolumeAttachments by the external-attacher)"},
	{"PLAN", DefaultPlan, "kubelet versions in hop order; the node starts at the first"},
	{"MATRIX", matrix.Default, "make test-matrix: kubelet versions whose every (from, to) pair the tour visits once, on one cluster at the newest"},
	{"MATRIX_NODES", fmt.Sprint(matrix.DefaultNodes), "make test-matrix: nodes that run the tour's trails at once (1: one node runs the whole tour)"},
	{"SCENARIO", "", "a catalogue fault each hop plants, or catalogue shapes (one, or several separated by commas) planted in one workload; the block shape picks CSI_MODE=ebs (go run ./scripts/skewtest scenarios lists them, with where each runs); empty: the baseline force-delete"},
	{"REPLICAS", "3", "StatefulSet replicas, one PVC each, all on the test node"},
	{"VOLUME_KIND", "csi", "csi (skewtest's CSI driver, or STORAGE_CLASS on existing) or local (local-volume PVs)"},
	{"KUBELET_SOURCE", "module", "module (build from the k8s.io/kubernetes Go module), release (download from dl.k8s.io, sha256-checked) or kindest (extract /usr/bin/kubelet from the kindest/node:<version> image on Docker Hub)"},
	{"KUBELETS", "", "one binary spec per plan entry, overriding KUBELET_SOURCE: vX.Y.Z, release:vX.Y.Z, module:vX.Y.Z, file:/path, checkout:/path, image:<ref>, latest-X.Y, ci/latest-X.Y"},
	{"RELEASE_BASE_URL", "https://dl.k8s.io", "mirror for release downloads"},
	{"ARTIFACTS", "./_artifacts/<run-id>", "where reports, JUnit and logs go; created if missing, and tried for writing before anything is made"},
	{"KEEP_CLUSTER_ON_FAILURE", "false", "leave a failed cluster up and print how to reach and remove it"},
	{"SKEWTEST_CACHE", "$HOME/.cache/skewtest", "binary cache (never in the repository)"},
	{"POLL_INTERVAL", "250ms", "how often node state is read while waiting; at least " + minPollInterval.String() + " (each poll reads the node's mountinfo and lists the API)"},
	{"CLEANUP_TIMEOUT", "3m", "how long the kubelet gets to clean up after each hop; at least " + minCleanupTimeout.String() + " (its volume manager and pod cleanup need seconds after it starts)"},
	{"SKEWTEST_TIMEOUT_FACTOR", "1", "multiplies the local provider's start timeouts and the scenario's waits (1 to 100), for emulated guests such as make test-hosts under TCG"},
	{"KUBECONFIG", "", "existing: the cluster's kubeconfig"},
	{"NODES", "", "existing: comma-separated test nodes (default: every worker)"},
	{"SSH_USER / SSH_KEY / SSH_KNOWN_HOSTS", "$USER / agent / ~/.ssh/known_hosts", "existing: how to reach nodes (host keys are always checked)"},
	{"SSH_ADDRESSES", "", "existing: NODE=HOST:PORT,... for nodes reached other than at their InternalIP on port 22 (a port forward, a VM's)"},
	{"STORAGE_CLASS", "", "existing: a StorageClass that provisions volumes on the test node"},
	{"KUBELET_BINARY / KUBELET_UNIT", "/usr/bin/kubelet / kubelet", "existing: the kubelet's path and systemd unit"},
	{"KUBELET_ROOT_DIR", "/var/lib/kubelet", "existing: the kubelet's --root-dir"},
	{"IMAGE", "registry.k8s.io/e2e-test-images/busybox:1.37.0-1", "existing, kops: the workload image (needs sh, sleep, date, mv)"},
	{"AWS_REGION / AWS_DEFAULT_REGION", "", "kops: the region (AWS_DEFAULT_REGION also read); credentials come from the AWS SDK's default chain only (AWS_PROFILE, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, SSO, instance roles)"},
	{"KOPS / KOPS_VERSION / KOPS_RELEASE_URL", "kops in PATH / / " + kops.DefaultReleaseURL, "kops: the kops binary, or a release to download from the mirror (checked against its published sha256)"},
	{"KOPS_STATE_STORE", "a bucket made for the run", "kops: s3://BUCKET[/PREFIX]; unset: a tagged bucket skewtest-kops-<run-id>, deleted at the end"},
	{"KOPS_ZONES", "<region>a", "kops: comma-separated zones"},
	{"KOPS_NODE_SIZE / KOPS_CONTROL_PLANE_SIZE", kops.DefaultNodeSize + " / " + kops.DefaultControlPlaneSize, "kops: instance types"},
	{"KOPS_ADMIN_ACCESS", "this machine's public /32", "kops: CIDR allowed to reach the API server and SSH"},
	{"KOPS_OWNER / KOPS_TTL", "the current user / " + kops.DefaultTTL.String(), "kops: owner and expiry tags on every resource; make janitor-aws deletes expired ones"},
	{"KOPS_CREATE_ARGS", "", "kops: more kops create cluster flags, space-separated"},
	{"DRY_RUN", "true", "make janitor-aws: list expired skewtest resources; DRY_RUN=false deletes them"},
}

// OptionsFromEnv reads Options from environment variables (see Settings).
func OptionsFromEnv(getenv func(string) string) (Options, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	o := Options{
		Provider:       getenv("PROVIDER"),
		Plan:           getenv("PLAN"),
		Matrix:         getenv("MATRIX"),
		Kind:           getenv("VOLUME_KIND"),
		KubeletSource:  getenv("KUBELET_SOURCE"),
		ReleaseBaseURL: getenv("RELEASE_BASE_URL"),
		ArtifactsDir:   getenv("ARTIFACTS"),
		CacheDir:       getenv("SKEWTEST_CACHE"),
		StorageClass:   getenv("STORAGE_CLASS"),
		Image:          getenv("IMAGE"),
		KindNodeImage:  getenv("KIND_NODE_IMAGE"),
		KindCSI:        getenv("KIND_CSI"),
		Scenario:       getenv("SCENARIO"),
		CSIMode:        getenv("CSI_MODE"),
	}
	if v := getenv("KUBELETS"); v != "" {
		o.Kubelets = splitList(v)
	}
	var err error
	if v := getenv("REPLICAS"); v != "" {
		if o.Replicas, err = strconv.Atoi(v); err != nil || o.Replicas < 1 || o.Replicas > 50 {
			return o, fmt.Errorf("%w: REPLICAS=%q: want a number from 1 to 50", ErrInvalid, v)
		}
	}
	if v := getenv("MATRIX_NODES"); v != "" {
		if o.MatrixNodes, err = strconv.Atoi(v); err != nil || o.MatrixNodes < 1 || o.MatrixNodes > maxMatrixNodes {
			return o, fmt.Errorf("%w: MATRIX_NODES=%q: want a number from 1 to %d", ErrInvalid, v, maxMatrixNodes)
		}
	}
	if v := getenv("KEEP_CLUSTER_ON_FAILURE"); v != "" {
		if o.KeepClusterOnFailure, err = strconv.ParseBool(v); err != nil {
			return o, fmt.Errorf("%w: KEEP_CLUSTER_ON_FAILURE=%q: want true or false", ErrInvalid, v)
		}
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{{"POLL_INTERVAL", &o.PollInterval}, {"CLEANUP_TIMEOUT", &o.CleanupTimeout}} {
		if v := getenv(d.name); v != "" {
			if *d.dst, err = time.ParseDuration(v); err != nil || *d.dst <= 0 {
				return o, fmt.Errorf("%w: %s=%q: want a duration such as 250ms or 3m", ErrInvalid, d.name, v)
			}
		}
	}
	if o.TimeoutFactor, err = timeouts.Parse(getenv(timeouts.FactorEnv)); err != nil {
		return o, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	o.Existing = existing.Config{
		Kubeconfig:     getenv("KUBECONFIG"),
		Nodes:          splitList(getenv("NODES")),
		KubeletBinary:  getenv("KUBELET_BINARY"),
		KubeletUnit:    getenv("KUBELET_UNIT"),
		KubeletRootDir: getenv("KUBELET_ROOT_DIR"),
		SSH: existing.SSHConfig{
			User:           getenv("SSH_USER"),
			KeyFile:        getenv("SSH_KEY"),
			KnownHostsFile: getenv("SSH_KNOWN_HOSTS"),
		},
	}
	if v := getenv("SSH_ADDRESSES"); v != "" {
		addrs, err := parseAddresses(v)
		if err != nil {
			return o, fmt.Errorf("%w: SSH_ADDRESSES=%q: %w", ErrInvalid, v, err)
		}
		o.Existing.SSH.Address = func(node string) string { return addrs[node] }
	}
	if o.Kops, err = kopsFromEnv(getenv); err != nil {
		return o, err
	}
	return o, nil
}

// parseAddresses reads SSH_ADDRESSES: NODE=HOST:PORT pairs, comma-separated.
func parseAddresses(v string) (map[string]string, error) {
	out := map[string]string{}
	for _, pair := range splitList(v) {
		node, addr, ok := strings.Cut(pair, "=")
		if _, _, err := net.SplitHostPort(addr); !ok || node == "" || err != nil {
			return nil, fmt.Errorf("%q: want NODE=HOST:PORT, e.g. worker-1=127.0.0.1:2222", pair)
		}
		out[node] = addr
	}
	return out, nil
}

// kopsFromEnv reads the kops provider's settings.
func kopsFromEnv(getenv func(string) string) (kops.Config, error) {
	c := kops.Config{
		Kops:             getenv("KOPS"),
		KopsVersion:      getenv("KOPS_VERSION"),
		ReleaseURL:       getenv("KOPS_RELEASE_URL"),
		Region:           firstNonEmpty(getenv("AWS_REGION"), getenv("AWS_DEFAULT_REGION")),
		Zones:            splitList(getenv("KOPS_ZONES")),
		StateStore:       getenv("KOPS_STATE_STORE"),
		SSHKey:           getenv("SSH_KEY"),
		Owner:            getenv("KOPS_OWNER"),
		AdminAccess:      getenv("KOPS_ADMIN_ACCESS"),
		NodeSize:         getenv("KOPS_NODE_SIZE"),
		ControlPlaneSize: getenv("KOPS_CONTROL_PLANE_SIZE"),
		CreateArgs:       strings.Fields(getenv("KOPS_CREATE_ARGS")),
	}
	if v := getenv("KOPS_TTL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("%w: KOPS_TTL=%q: want a duration such as 6h", ErrInvalid, v)
		}
		c.TTL = d
	}
	return c, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
