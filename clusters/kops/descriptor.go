package kops

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/skewtest/clusters/internal/csidriver"
	"sigs.k8s.io/skewtest/clusters/nodes"
	"sigs.k8s.io/skewtest/clusters/registry"
	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/reports"
)

// Descriptor is the kops provider as package clusters lists it. Its
// settings are a Config (FromEnv), which the shared options complete
// (Descriptor's check and New see the same: configFor).
var Descriptor = registry.Descriptor{
	Name:         providerName,
	Help:         "a kops cluster on AWS with the EBS CSI driver",
	RunDirPrefix: RunDirPrefix,
	// It needs no root here: it reaches AWS and its nodes over SSH.
	RunRoot:        registry.UserRunRoot,
	CreatesCluster: true,
	// One worker so far.
	MaxTestNodes: 1,
	// Its volumes are EBS CSI's; CSI_MODE's default is all it accepts.
	CSIModes: []string{string(csidriver.ModeTmpfs)},
	// It changes nothing on this host, so its runs take no host lock and
	// do not hold up local and kind runs for the hour a cluster can take;
	// clean tells a live run by the process its state records (Inspect).
	CleansHost: false,
	NodeType:   (*Node)(nil),
	// Its nodes are the run's own machines, with EBS volumes.
	NodeCapabilities: []nodes.Capability{nodes.Disposable},
	GatesRefused:     "kops writes its kubelets' configuration from the cluster spec, and a hop swaps only the binary",
	TeardownTimeout:  defaultTeardownTimeout,
	Settings: []registry.Setting{
		{Name: "AWS_REGION / AWS_DEFAULT_REGION", Help: "the region (AWS_DEFAULT_REGION also read); credentials come from the AWS SDK's default chain only (AWS_PROFILE, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, SSO, instance roles)"},
		{Name: "KOPS / KOPS_VERSION / KOPS_RELEASE_URL", Default: "kops in PATH / / " + defaultReleaseURL, Help: "the kops binary, or a release to download from the mirror (checked against its published sha256)"},
		{Name: "KOPS_STATE_STORE", Default: "a bucket made for the run", Help: "s3://BUCKET[/PREFIX]; unset: a tagged bucket skewtest-kops-<run-id>, deleted at the end"},
		{Name: "KOPS_ZONES", Default: "<region>a", Help: "comma-separated zones"},
		{Name: "KOPS_NODE_SIZE / KOPS_CONTROL_PLANE_SIZE", Default: defaultNodeSize + " / " + defaultControlPlaneSize, Help: "instance types"},
		{Name: "KOPS_ADMIN_ACCESS", Default: "this machine's public /32", Help: "CIDR allowed to reach the API server and SSH"},
		{Name: "KOPS_OWNER / KOPS_TTL", Default: "the current user / " + defaultTTL.String(), Help: "owner and expiry tags on every resource; make janitor-aws deletes expired ones"},
		{Name: "KOPS_CREATE_ARGS", Help: "more kops create cluster flags, space-separated"},
		{Name: "STORAGE_CLASS", Default: defaultStorageClass, Help: "the StorageClass of the workload's claims (kops's default is the EBS CSI driver's)"},
		{Name: "IMAGE", Default: storage.StockImage, Help: "the workload image, pulled by the nodes (needs sh, sleep, date, mv)"},
		{Name: "SSH_KEY", Default: "a keypair made for the run", Help: "a private key whose SSH_KEY.pub kops installs on the nodes"},
	},
	FromEnv: func(getenv func(string) string) (any, error) { return configFromEnv(getenv) },
	Check: func(ctx context.Context, o registry.Options, s any) error {
		// kops, a region and AWS credentials, before anything is built
		// or made: the settings New will give New. The run ID is made
		// once the kubelets are resolved, after this check, so a
		// stand-in of the same form takes its place.
		if o.RunID == "" {
			o.RunID = reports.NewRunID(time.Now())
		}
		cfg, err := configFor(o, s)
		if err != nil {
			return err
		}
		return cfg.Validate(ctx)
	},
	New: func(o registry.Options, s any) (registry.Provider, error) {
		cfg, err := configFor(o, s)
		if err != nil {
			return nil, err
		}
		return newProvider(cfg)
	},
	// Its runs hold the host lock while they run, which `skewtest clean`
	// takes first: a state that names the run is all Clean needs.
	Inspect: func(dir string) registry.RunDir {
		r := registry.RunDir{Path: dir}
		runID := strings.TrimPrefix(filepath.Base(dir), RunDirPrefix)
		st, err := readState(dir)
		switch {
		case err != nil:
			r.NotARun = fmt.Errorf("no kops run state: %w", err)
		case st.RunID != runID:
			r.NotARun = fmt.Errorf("%s is the state of run %q, not of %q", filepath.Join(dir, stateFile), st.RunID, runID)
		default:
			r.OwnedBy(st.Owner)
		}
		return r
	},
	Clean: clean,
}

// configFor is the provider's settings as New makes it and its check
// validates it: s (a Config) with what the shared options fill in.
func configFor(o registry.Options, s any) (Config, error) {
	cfg, err := registry.SettingsAs[Config](providerName, s)
	if err != nil {
		return cfg, err
	}
	cfg.RunID, cfg.APIServerVersion, cfg.CacheDir, cfg.ArtifactsDir = o.RunID, o.APIServerVersion, o.CacheDir, o.ArtifactsDir
	cfg.TimeoutFactor = o.TimeoutFactor
	if cfg.Logger == nil {
		cfg.Logger = o.Logger
	}
	if len(o.InitialKubelets) == 1 {
		cfg.Kubelet = o.InitialKubelets[0]
	}
	if cfg.RunDir == "" && o.RunID != "" {
		cfg.RunDir = filepath.Join(registry.UserRunRoot(o.RunRoot), RunDirPrefix+o.RunID)
	}
	return cfg, nil
}

// configFromEnv reads the provider's settings (Descriptor.Settings) from
// the environment.
func configFromEnv(getenv func(string) string) (Config, error) {
	region := getenv("AWS_REGION")
	if region == "" {
		region = getenv("AWS_DEFAULT_REGION")
	}
	c := Config{
		Kops:             getenv("KOPS"),
		KopsVersion:      getenv("KOPS_VERSION"),
		ReleaseURL:       getenv("KOPS_RELEASE_URL"),
		Region:           region,
		Zones:            registry.List(getenv("KOPS_ZONES")),
		StateStore:       getenv("KOPS_STATE_STORE"),
		SSHKey:           getenv("SSH_KEY"),
		Owner:            getenv("KOPS_OWNER"),
		AdminAccess:      getenv("KOPS_ADMIN_ACCESS"),
		NodeSize:         getenv("KOPS_NODE_SIZE"),
		ControlPlaneSize: getenv("KOPS_CONTROL_PLANE_SIZE"),
		CreateArgs:       strings.Fields(getenv("KOPS_CREATE_ARGS")),
		StorageClass:     getenv("STORAGE_CLASS"),
		Image:            getenv("IMAGE"),
	}
	if v := getenv("KOPS_TTL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("KOPS_TTL=%q: want a duration such as 6h", v)
		}
		c.TTL = d
	}
	return c, nil
}
