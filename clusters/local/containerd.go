package local

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec" // ctr on this host, importing images into the node's containerd
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/internal/images"
	"sigs.k8s.io/skewtest/clusters/local/internal/process"
)

// containerd v2 config (version 3). Every path is under the node's
// containerd directory in the run directory, so this containerd never meets
// one the host already runs, nor another node's: two kubelets on one
// containerd would each remove the other's pods as orphans.
var containerdConfigTmpl = template.Must(template.New("containerd").Parse(`version = 3
root = "{{.Dir}}/root"
state = "{{.Dir}}/state"

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
    path = "{{.Dir}}/opt"

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
          Root = "{{.Dir}}/runc"
          # The kubelets' cgroup driver is cgroupfs (cgroupDriver).
          SystemdCgroup = {{.SystemdCgroup}}
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["/usr/lib/cni"]
      conf_dir = "{{.CNIDir}}/net.d"
      max_conf_num = 1
`))

// ContainerdSocket is where the node's containerd listens.
func (n *Node) ContainerdSocket() string { return n.l.containerdSocket() }

// startContainerd starts the node's containerd; the node owns it, so Down
// stops it after the node's pods.
func (n *Node) startContainerd(ctx context.Context, bins map[string]binaries.Binary) error {
	if err := n.writeCNIConfig(); err != nil {
		return err
	}
	dir := n.l.containerdDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cfgFile := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgFile, []byte(n.containerdConfig(bins["containerd-shim-runc-v2"].Path)), 0o644); err != nil {
		return err
	}
	keep := func(proc *process.Process) {
		n.mu.Lock()
		n.containerd = proc
		n.mu.Unlock()
	}
	return n.p.startDaemon(ctx, n.l.containerdName(), []string{bins["containerd"].Path, "--config", cfgFile, "--log-level", "info"},
		60*time.Second, dialable(n.l.containerdSocket()), keep)
}

// containerdConfig is the node's containerd configuration, with shim the
// runc shim's path.
func (n *Node) containerdConfig(shim string) string {
	var cfg strings.Builder
	_ = containerdConfigTmpl.Execute(&cfg, map[string]string{
		"Dir": n.l.containerdDir(), "CNIDir": n.l.cniDir(), "Socket": n.l.containerdSocket(), "PauseImage": images.Pause,
		"Shim": shim, "Runc": "/usr/sbin/runc", "SystemdCgroup": strconv.FormatBool(cgroupDriver == "systemd"),
	})
	return cfg.String()
}

func (n *Node) importImages(ctx context.Context, bins map[string]binaries.Binary, tarball string) error {
	cmd := exec.CommandContext(ctx, bins["ctr"].Path, "--address", n.l.containerdSocket(), "-n", "k8s.io",
		"images", "import", "--label", "io.cri-containerd.pinned=pinned", tarball)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("local provider: import images into %s's containerd: %w\n%s", n.l.name, err, out)
	}
	return nil
}

// writeCNIConfig writes a bridge + host-local network of the node's own: a
// bridge name, a subnet and an IPAM data dir nobody else uses, and no
// masquerading (which would add iptables rules).
func (n *Node) writeCNIConfig() error {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       n.st.CNINetwork,
		"plugins": []any{
			map[string]any{
				"type":      "bridge",
				"bridge":    n.st.Bridge,
				"isGateway": true,
				"ipMasq":    false,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": filepath.Join(n.l.cniDir(), "networks"),
					"ranges":  [][]map[string]string{{{"subnet": n.l.podSubnet()}}},
				},
			},
			map[string]any{"type": "loopback"},
		},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(n.l.cniDir(), "net.d"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(n.l.cniDir(), "net.d", "10-skewtest.conflist"), b, 0o644)
}
