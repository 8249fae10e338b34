package nodeimage

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec" // ctr on this host, printing the runtime spec the node image ships
	"path/filepath"
	"regexp"
	"strings"

	"sigs.k8s.io/skewtest/clusters/binaries"
)

// installRuntime puts containerd v2, crictl, Debian's runc and CNI plugins,
// the patched containerd config and cri-base.json into root.
func installRuntime(ctx context.Context, root string, ctrd map[string]binaries.Binary, crictl, pauseImage string) error {
	for _, name := range []string{"containerd", "containerd-shim-runc-v2", "ctr"} {
		bin, ok := ctrd[name]
		if !ok {
			return fmt.Errorf("containerd build has no %s", name)
		}
		if err := copyFileIn(root, "/usr/local/bin/"+name, bin.Path, 0o755); err != nil {
			return err
		}
	}
	if err := copyFileIn(root, "/usr/local/bin/crictl", crictl, 0o755); err != nil {
		return err
	}
	// runc and the CNI plugins come from Debian (debootstrap --include).
	if _, err := os.Stat(filepath.Join(root, "usr", "sbin", "runc")); err != nil {
		return fmt.Errorf("Debian's runc is missing from the base: %w", err)
	}
	if err := linkCNIPlugins(root); err != nil {
		return err
	}

	cfgPath, err := resolveIn(root, "/etc/containerd/config.toml", true)
	if err != nil {
		return err
	}
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		return fmt.Errorf("kind's containerd config: %w", err)
	}
	patched, err := patchContainerdConfig(string(cfg), pauseImage)
	if err != nil {
		return err
	}
	if err := writeFileIn(root, "/etc/containerd/config.toml", []byte(patched), 0o644); err != nil {
		return err
	}

	// cri-base.json: `ctr oci spec` with kind's createContainer hook and
	// without rlimits, as kind's Dockerfile makes it with jq.
	out, err := exec.CommandContext(ctx, ctrd["ctr"].Path, "oci", "spec").Output()
	if err != nil {
		return fmt.Errorf("ctr oci spec: %w", err)
	}
	spec, err := criBaseSpec(out)
	if err != nil {
		return err
	}
	return writeFileIn(root, "/etc/containerd/cri-base.json", spec, 0o644)
}

// linkCNIPlugins hard-links Debian's plugins (/usr/lib/cni) into
// /opt/cni/bin, where kind's containerd config (the default bin_dir)
// looks.
func linkCNIPlugins(root string) error {
	src, err := resolveIn(root, "/usr/lib/cni", true)
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("Debian's CNI plugins are missing from the base: %w", err)
	}
	dst, err := resolveIn(root, "/opt/cni/bin", true)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	found := map[string]bool{}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		target := filepath.Join(dst, e.Name())
		os.Remove(target)
		if err := os.Link(filepath.Join(src, e.Name()), target); err != nil {
			return err
		}
		found[e.Name()] = true
	}
	for _, need := range []string{"bridge", "host-local", "loopback", "portmap"} {
		if !found[need] {
			return fmt.Errorf("CNI plugin %s missing from Debian's containernetworking-plugins", need)
		}
	}
	return nil
}

var (
	restrictOOMRE   = regexp.MustCompile(`(?m)^([ \t]*)restrict_oom_score_adj[ \t]*=[ \t]*(true|false)[ \t]*$`)
	sandboxImageRE  = regexp.MustCompile(`(?m)^([ \t]*)sandbox_image[ \t]*=[ \t]*"[^"\n]*"`)
	configVersionRE = regexp.MustCompile(`(?m)^version[ \t]*=[ \t]*2[ \t]*$`)
)

// patchContainerdConfig adapts kind's containerd config (version 2, which
// containerd v2 migrates on load; kept so that kind's containerdConfigPatches
// still apply):
//   - restrict_oom_score_adj = true: these machines' capability bounding set
//     lacks CAP_SYS_RESOURCE, and without it runc fails every sandbox ("can't
//     get final child's PID from pipe: EOF");
//   - sandbox_image = the pause image kubeadm of this version wants, which
//     is the one imported (as `kind build node-image` keeps the config's and
//     imports that).
func patchContainerdConfig(cfg, pauseImage string) (string, error) {
	if !configVersionRE.MatchString(cfg) {
		return "", fmt.Errorf("kind's containerd config is not version 2 any more: review patchContainerdConfig")
	}
	if !restrictOOMRE.MatchString(cfg) {
		return "", fmt.Errorf("kind's containerd config has no restrict_oom_score_adj line to patch")
	}
	if !sandboxImageRE.MatchString(cfg) {
		return "", fmt.Errorf("kind's containerd config has no sandbox_image line to patch")
	}
	cfg = restrictOOMRE.ReplaceAllString(cfg, "${1}restrict_oom_score_adj = true")
	cfg = sandboxImageRE.ReplaceAllString(cfg, `${1}sandbox_image = "`+pauseImage+`"`)
	header := "# kind's images/base/files/etc/containerd/config.toml (" + KindVersion + "), patched by skewtest:\n" +
		"# restrict_oom_score_adj = true (no CAP_SYS_RESOURCE on these machines), sandbox_image = kubeadm's pause.\n"
	return header + cfg, nil
}

// criBaseSpec turns `ctr oci spec` output into kind's cri-base.json: its
// createContainer hook appended, process.rlimits removed.
func criBaseSpec(ociSpec []byte) ([]byte, error) {
	var spec map[string]any
	if err := json.Unmarshal(ociSpec, &spec); err != nil {
		return nil, fmt.Errorf("parse ctr oci spec: %w", err)
	}
	if p, ok := spec["process"].(map[string]any); ok {
		delete(p, "rlimits")
	}
	hooks, _ := spec["hooks"].(map[string]any)
	if hooks == nil {
		hooks = map[string]any{}
	}
	cc, _ := hooks["createContainer"].([]any)
	hooks["createContainer"] = append(cc, map[string]any{"path": "/kind/bin/mount-product-files.sh"})
	spec["hooks"] = hooks
	out, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// installKubernetes puts kubeadm, kubelet and kubectl into /usr/bin (where
// kind's kubelet.service expects the kubelet), writes /kind/version and the
// default CNI manifest.
func installKubernetes(root, kv string, kube map[string]binaries.Binary) error {
	for _, name := range []string{"kubeadm", "kubelet", "kubectl"} {
		if err := copyFileIn(root, "/usr/bin/"+name, kube[name].Path, 0o755); err != nil {
			return err
		}
	}
	if err := writeFileIn(root, "/kind/version", []byte(kv), 0o644); err != nil {
		return err
	}
	return writeFileIn(root, "/kind/manifests/default-cni.yaml", []byte(cniManifest(KindCNIImage)), 0o644)
}

func pauseImageOf(images []string) string {
	for _, i := range images {
		if strings.Contains(i, "/pause:") {
			return i
		}
	}
	return ""
}
