package local

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"text/template"
	"time"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/internal/images"
)

// containerd v2 config (version 3). Every path is under the run directory,
// so this containerd never meets one the host already runs.
var containerdConfig = template.Must(template.New("containerd").Parse(`version = 3
root = "{{.Dir}}/containerd/root"
state = "{{.Dir}}/containerd/state"

[grpc]
  address = "{{.Socket}}"

[ttrpc]
  address = "{{.Socket}}.ttrpc"

[debug]
  address = ""

[metrics]
  address = ""

[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = "{{.Dir}}/containerd/opt"

  [plugins.'io.containerd.nri.v1.nri']
    disable = true

  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = "{{.PauseImage}}"

  [plugins.'io.containerd.cri.v1.runtime']
    # The VM's capability bounding set lacks CAP_SYS_RESOURCE: without this
    # runc fails every sandbox ("can't get final child's PID from pipe").
    restrict_oom_score_adj = true
    tolerate_missing_hugetlb_controller = true
    netns_mounts_under_state_dir = true
    enable_cdi = false
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        runtime_path = "{{.Shim}}"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = "{{.Runc}}"
          Root = "{{.Dir}}/containerd/runc"
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["/usr/lib/cni"]
      conf_dir = "{{.Dir}}/cni/net.d"
      max_conf_num = 1
`))

// ContainerdSocket is where this run's containerd listens.
func (p *Provider) ContainerdSocket() string { return p.path("containerd", "containerd.sock") }

func (p *Provider) startContainerd(ctx context.Context, bins map[string]binaries.Binary, st state) error {
	if err := p.writeCNIConfig(st); err != nil {
		return err
	}
	if err := os.MkdirAll(p.path("containerd"), 0o755); err != nil {
		return err
	}
	var cfg strings.Builder
	if err := containerdConfig.Execute(&cfg, map[string]string{
		"Dir": p.dir, "Socket": p.ContainerdSocket(), "PauseImage": images.Pause,
		"Shim": bins["containerd-shim-runc-v2"].Path, "Runc": "/usr/sbin/runc",
	}); err != nil {
		return err
	}
	cfgFile := p.path("containerd", "config.toml")
	if err := os.WriteFile(cfgFile, []byte(cfg.String()), 0o644); err != nil {
		return err
	}
	return p.startDaemon(ctx, "containerd", []string{bins["containerd"].Path, "--config", cfgFile, "--log-level", "info"},
		60*time.Second, func(ctx context.Context) error {
			c, err := (&net.Dialer{}).DialContext(ctx, "unix", p.ContainerdSocket())
			if err != nil {
				return err
			}
			return c.Close()
		})
}

func (p *Provider) importImages(ctx context.Context, bins map[string]binaries.Binary, tarball string) error {
	cmd := exec.CommandContext(ctx, bins["ctr"].Path, "--address", p.ContainerdSocket(), "-n", "k8s.io",
		"images", "import", "--label", "io.cri-containerd.pinned=pinned", tarball)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("local provider: import images into containerd: %w\n%s", err, out)
	}
	return nil
}

// writeCNIConfig writes a bridge + host-local network of this run's own: a
// bridge name, a subnet and an IPAM data dir nobody else uses, and no
// masquerading (which would add iptables rules).
func (p *Provider) writeCNIConfig(st state) error {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       st.CNINetwork,
		"plugins": []any{
			map[string]any{
				"type":      "bridge",
				"bridge":    st.Bridge,
				"isGateway": true,
				"ipMasq":    false,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": p.path("cni", "networks"),
					"ranges":  [][]map[string]string{{{"subnet": "10.244.0.0/24"}}},
				},
			},
			map[string]any{"type": "loopback"},
		},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(p.path("cni", "net.d"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p.path("cni", "net.d", "10-skewtest.conflist"), b, 0o644)
}
