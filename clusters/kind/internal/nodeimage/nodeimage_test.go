package nodeimage

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/version"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
)

// kindFilesDir returns kind's images/base/files from the module cache, or
// skips when the module is not downloaded.
func kindFilesDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Skipf("go env GOMODCACHE: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "sigs.k8s.io", "kind@"+KindVersion, "images", "base", "files")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("kind module source not in the module cache: %v", err)
	}
	return dir
}

func TestKindVersionMatchesGoMod(t *testing.T) {
	gomod, err := os.ReadFile("../../../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(gomod), "sigs.k8s.io/kind "+KindVersion+"\n") {
		t.Errorf("go.mod does not require sigs.k8s.io/kind %s: update KindVersion", KindVersion)
	}
}

const kindConfigSample = `# explicitly use v2 config format
version = 2

[plugins."io.containerd.grpc.v1.cri"]
  # use fixed sandbox image
  sandbox_image = "registry.k8s.io/pause:3.10"
  tolerate_missing_hugepages_controller = true
  # restrict_oom_score_adj needs to be true when running inside UserNS (rootless)
  restrict_oom_score_adj = false
`

func TestPatchContainerdConfig(t *testing.T) {
	got, err := patchContainerdConfig(kindConfigSample, "registry.k8s.io/pause:3.10.2")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\n  restrict_oom_score_adj = true\n",
		"\n  sandbox_image = \"registry.k8s.io/pause:3.10.2\"\n",
		"\nversion = 2\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("patched config lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "restrict_oom_score_adj = false") || strings.Contains(got, "pause:3.10\"") {
		t.Errorf("old values left:\n%s", got)
	}
	// Idempotent.
	again, err := patchContainerdConfig(strings.SplitN(got, "\n", 3)[2], "registry.k8s.io/pause:3.10.2")
	if err != nil || strings.Count(again, "\n  restrict_oom_score_adj = true\n") != 1 {
		t.Errorf("second patch: %v\n%s", err, again)
	}
	for name, cfg := range map[string]string{
		"no restrict line": strings.Replace(kindConfigSample, "restrict_oom_score_adj = false", "", 1),
		"no sandbox line":  strings.Replace(kindConfigSample, "sandbox_image", "# sandbox", 1),
		"version 3":        strings.Replace(kindConfigSample, "version = 2", "version = 3", 1),
	} {
		if _, err := patchContainerdConfig(cfg, "p"); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestPatchKindsOwnContainerdConfig(t *testing.T) {
	cfg, err := os.ReadFile(filepath.Join(kindFilesDir(t), "etc", "containerd", "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := patchContainerdConfig(string(cfg), "registry.k8s.io/pause:3.10.2")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "restrict_oom_score_adj = true") || !strings.Contains(got, `sandbox_image = "registry.k8s.io/pause:3.10.2"`) {
		t.Errorf("patched:\n%s", got)
	}
}

func TestCriBaseSpec(t *testing.T) {
	in := `{"ociVersion":"1.2.0","process":{"args":["sh"],"rlimits":[{"type":"RLIMIT_NOFILE","hard":1024,"soft":1024}]},"hooks":{"createContainer":[{"path":"/other"}]}}`
	out, err := criBaseSpec([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Process map[string]any `json:"process"`
		Hooks   struct {
			CreateContainer []struct{ Path string } `json:"createContainer"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(out, &spec); err != nil {
		t.Fatal(err)
	}
	if _, ok := spec.Process["rlimits"]; ok {
		t.Error("rlimits kept")
	}
	if n := len(spec.Hooks.CreateContainer); n != 2 || spec.Hooks.CreateContainer[1].Path != "/kind/bin/mount-product-files.sh" {
		t.Errorf("hooks: %+v", spec.Hooks.CreateContainer)
	}
	// No hooks at all in ctr's spec.
	out, err = criBaseSpec([]byte(`{"process":{}}`))
	if err != nil || !strings.Contains(string(out), "/kind/bin/mount-product-files.sh") {
		t.Errorf("%v %s", err, out)
	}
}

func TestCNIManifest(t *testing.T) {
	m := cniManifest(KindCNIImage)
	if strings.Contains(m, "{{") {
		t.Error("manifest must not look like a kind template")
	}
	if !strings.Contains(m, "would you kindly patch this file") {
		t.Error("manifest lacks kind's patch marker (CONTROL_PLANE_ENDPOINT)")
	}
	dec := k8syaml.NewYAMLOrJSONDecoder(strings.NewReader(m), 4096)
	kinds := map[string]json.RawMessage{}
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatal(err)
		}
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		var meta struct{ Kind string }
		if err := json.Unmarshal(raw, &meta); err != nil {
			t.Fatal(err)
		}
		kinds[meta.Kind] = raw
	}
	for _, k := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet"} {
		if kinds[k] == nil {
			t.Fatalf("manifest has no %s", k)
		}
	}
	var role rbacv1.ClusterRole
	if err := json.Unmarshal(kinds["ClusterRole"], &role); err != nil {
		t.Fatal(err)
	}
	if len(role.Rules) != 1 || !reflect.DeepEqual(role.Rules[0].Resources, []string{"nodes"}) || !strings.Contains(strings.Join(role.Rules[0].Verbs, ","), "list") {
		t.Errorf("role rules: %+v", role.Rules)
	}
	var binding rbacv1.ClusterRoleBinding
	if err := json.Unmarshal(kinds["ClusterRoleBinding"], &binding); err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	if err := json.Unmarshal(kinds["DaemonSet"], &ds); err != nil {
		t.Fatal(err)
	}
	spec := ds.Spec.Template.Spec
	if len(binding.Subjects) != 1 || binding.Subjects[0].Kind != "ServiceAccount" || binding.Subjects[0].Name != spec.ServiceAccountName ||
		binding.Subjects[0].Namespace != ds.Namespace || binding.RoleRef.Name != role.Name {
		t.Errorf("binding %+v does not give the DaemonSet's ServiceAccount %q the role %q", binding, spec.ServiceAccountName, role.Name)
	}
	if !spec.HostNetwork || len(spec.Containers) != 1 {
		t.Fatalf("DaemonSet spec: %+v", spec)
	}
	c := spec.Containers[0]
	if c.Image != KindCNIImage || c.ImagePullPolicy != "Never" {
		t.Errorf("image %s %s", c.Image, c.ImagePullPolicy)
	}
	if len(c.Env) == 0 || c.Env[0].Name != "NODE_NAME" || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("env: %+v", c.Env)
	}
	if len(spec.Tolerations) != 1 || spec.Tolerations[0].Operator != "Exists" {
		t.Errorf("tolerations: %+v", spec.Tolerations)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/etc/cni/net.d" || spec.Volumes[0].HostPath.Path != "/etc/cni/net.d" {
		t.Errorf("mounts: %+v %+v", c.VolumeMounts, spec.Volumes)
	}
}

const constantsSample = `
const (
	// DefaultEtcdVersion indicates the default etcd version that kubeadm uses
	DefaultEtcdVersion = "3.7.0-0"
	CoreDNSVersion = "v1.14.6"
	PauseVersion = "3.10.2"
)
var (
	SupportedEtcdVersion = map[uint8]string{
		34: "3.6.4-0",
		35: "3.7.0-0",
		36: "3.7.1-0",
	}
)
`

func TestKubeadmImages(t *testing.T) {
	for v, etcd := range map[string]string{"v1.37.2": "3.7.1-0", "v1.35.0": "3.7.0-0", "v1.30.1": "3.6.4-0", "v1.34.4": "3.6.4-0"} {
		got, err := kubeadmImages([]byte(constantsSample), version.MustParseSemantic(v))
		if err != nil {
			t.Fatal(err)
		}
		want := []string{
			"registry.k8s.io/kube-apiserver:" + v,
			"registry.k8s.io/kube-controller-manager:" + v,
			"registry.k8s.io/kube-scheduler:" + v,
			"registry.k8s.io/kube-proxy:" + v,
			"registry.k8s.io/coredns/coredns:v1.14.6",
			"registry.k8s.io/pause:3.10.2",
			"registry.k8s.io/etcd:" + etcd,
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %v\nwant %v", v, got, want)
		}
		set, err := parseKubeadmImages(got)
		if err != nil {
			t.Fatal(err)
		}
		if set.Etcd.Tag != etcd || set.CoreDNS.Name != "coredns" || set.Pause.Ref != "registry.k8s.io/pause:3.10.2" || set.APIServer.Tag != v {
			t.Errorf("parsed %+v", set)
		}
		if pauseImageOf(got) != "registry.k8s.io/pause:3.10.2" {
			t.Errorf("pauseImageOf: %s", pauseImageOf(got))
		}
	}
	if _, err := kubeadmImages([]byte("const X = 1"), version.MustParseSemantic("v1.37.2")); err == nil {
		t.Error("no error for constants without versions")
	}
	if _, err := parseKubeadmImages([]string{"registry.k8s.io/etcd:3.7.0-0"}); err == nil {
		t.Error("no error for an incomplete list")
	}
	if _, err := parseKubeadmImages([]string{"registry.k8s.io/kube-foo:v1"}); err == nil {
		t.Error("no error for an unknown image")
	}
	// etcd's module version from its tag.
	if m := etcdMain("3.7.0-0"); m.Version != "v3.7.0" || m.Module != "go.etcd.io/etcd/server/v3" {
		t.Errorf("etcdMain: %+v", m)
	}
}

func TestBaseKeyStable(t *testing.T) {
	if baseKey() != baseKey() || !strings.HasPrefix(baseKey(), suite+"-") {
		t.Error(baseKey())
	}
	for _, p := range []string{"systemd", "runc", "containernetworking-plugins", "jq", "iptables", "nftables", "conntrack", "ca-certificates"} {
		if !contains(basePackages, p) {
			t.Errorf("base packages lack %s", p)
		}
	}
}

const dpkgStatusSample = `Package: iptables
Status: install ok installed
Architecture: amd64
Depends: libip4tc2 (= 1.8.9-2), libxtables12 (= 1.8.9-2), netbase, libc6 (>= 2.34)
Description: x
 more text: with a colon

Package: libxtables12
Status: install ok installed
Architecture: amd64
Pre-Depends: libc6:any (>= 2.34)

Package: libip4tc2
Status: install ok installed
Architecture: amd64

Package: netbase
Status: install ok installed
Architecture: all

Package: libc6
Status: install ok installed
Architecture: amd64
Depends: libgcc-s1 | libgcc1, awk-impl

Package: libgcc-s1
Status: install ok installed
Architecture: amd64

Package: mawk
Status: install ok installed
Architecture: amd64
Provides: awk

Package: gone
Status: deinstall ok config-files
Architecture: amd64
`

func TestDpkgClosure(t *testing.T) {
	pkgs := parseDpkgStatus(dpkgStatusSample)
	if _, ok := pkgs["gone"]; ok {
		t.Error("a removed package counted as installed")
	}
	got, err := dependencyClosure(pkgs, []string{"iptables"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"iptables", "libc6", "libgcc-s1", "libip4tc2", "libxtables12", "netbase"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v want %v", got, want)
	}
	if _, err := dependencyClosure(pkgs, []string{"nftables"}); err == nil {
		t.Error("no error for a root that is not installed")
	}
	if d := parseDepends("a (>= 1), b | c:any, d:amd64"); !reflect.DeepEqual(d, [][]string{{"a"}, {"b", "c"}, {"d"}}) {
		t.Errorf("parseDepends: %v", d)
	}
}

// fakeRootfs makes a merged-/usr root with a package and an alternative.
func fakeRootfs(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"usr/bin", "usr/sbin", "usr/lib/x86_64-linux-gnu", "usr/share/doc/iptables", "etc/alternatives", "var/lib/dpkg/info"} {
		must(os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	for _, l := range [][2]string{{"bin", "usr/bin"}, {"sbin", "usr/sbin"}, {"lib", "usr/lib"}} {
		must(os.Symlink(l[1], filepath.Join(root, l[0])))
	}
	must(os.WriteFile(filepath.Join(root, "usr/sbin/xtables-nft-multi"), []byte("bin"), 0o755))
	must(os.Symlink("xtables-nft-multi", filepath.Join(root, "usr/sbin/iptables-nft")))
	must(os.WriteFile(filepath.Join(root, "usr/lib/x86_64-linux-gnu/libxtables.so.12.7.0"), []byte("lib"), 0o644))
	must(os.Symlink("libxtables.so.12.7.0", filepath.Join(root, "usr/lib/x86_64-linux-gnu/libxtables.so.12")))
	must(os.WriteFile(filepath.Join(root, "usr/share/doc/iptables/copyright"), []byte("c"), 0o644))
	must(os.Symlink("/usr/sbin/iptables-nft", filepath.Join(root, "etc/alternatives/iptables")))
	must(os.Symlink("/etc/alternatives/iptables", filepath.Join(root, "usr/sbin/iptables")))
	must(os.WriteFile(filepath.Join(root, "var/lib/dpkg/status"), []byte("Package: iptables\nStatus: install ok installed\nArchitecture: amd64\nDepends: libxtables12\n\nPackage: libxtables12\nStatus: install ok installed\nArchitecture: amd64\n"), 0o644))
	must(os.WriteFile(filepath.Join(root, "var/lib/dpkg/info/iptables.list"), []byte("/.\n/usr\n/usr/sbin\n/usr/sbin/xtables-nft-multi\n/usr/sbin/iptables-nft\n/usr/share/doc/iptables/copyright\n"), 0o644))
	must(os.WriteFile(filepath.Join(root, "var/lib/dpkg/info/libxtables12:amd64.list"), []byte("/.\n/lib/x86_64-linux-gnu/libxtables.so.12\n/lib/x86_64-linux-gnu/libxtables.so.12.7.0\n"), 0o644))
	return root
}

func TestResolveIn(t *testing.T) {
	root := fakeRootfs(t)
	for in, want := range map[string]string{
		"/usr/sbin/iptables":                     "/usr/sbin/xtables-nft-multi",
		"/sbin/iptables":                         "/usr/sbin/xtables-nft-multi",
		"/lib/x86_64-linux-gnu/libxtables.so.12": "/usr/lib/x86_64-linux-gnu/libxtables.so.12.7.0",
		"/lib/../../../etc":                      "/etc",
		"/lib/missing/file":                      "/usr/lib/missing/file",
	} {
		got, err := resolveIn(root, in, true)
		if err != nil || got != filepath.Join(root, want) {
			t.Errorf("resolveIn(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	got, err := resolveIn(root, "/sbin/iptables", false)
	if err != nil || got != filepath.Join(root, "usr/sbin/iptables") {
		t.Errorf("no-follow: %s %v", got, err)
	}
	if err := os.Symlink("loop", filepath.Join(root, "loop")); err != nil {
		t.Fatal(err)
	}
	if _, err := resolveIn(root, "/loop/x", true); err == nil {
		t.Error("no error for a symlink loop")
	}
}

func TestDpkgLayer(t *testing.T) {
	root := fakeRootfs(t)
	entries, err := dpkgLayer(root, []string{"iptables"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]layerEntry{}
	for _, e := range entries {
		got[e.Name] = e
	}
	want := map[string]byte{
		"usr":                        tar.TypeDir,
		"usr/sbin":                   tar.TypeDir,
		"usr/sbin/xtables-nft-multi": tar.TypeReg,
		"usr/sbin/iptables-nft":      tar.TypeSymlink,
		"usr/sbin/iptables":          tar.TypeSymlink,
		"etc/alternatives/iptables":  tar.TypeSymlink,
		"usr/lib/x86_64-linux-gnu/libxtables.so.12.7.0": tar.TypeReg,
		"usr/lib/x86_64-linux-gnu/libxtables.so.12":     tar.TypeSymlink,
		"lib":  tar.TypeSymlink,
		"bin":  tar.TypeSymlink,
		"sbin": tar.TypeSymlink,
	}
	for name, typ := range want {
		if e, ok := got[name]; !ok || e.Type != typ {
			t.Errorf("%s: got %+v, want type %q", name, e, typ)
		}
	}
	if _, ok := got["usr/share/doc/iptables/copyright"]; ok {
		t.Error("docs carried into the layer")
	}
	if got["usr/sbin/xtables-nft-multi"].Mode != 0o755 {
		t.Errorf("mode %o", got["usr/sbin/xtables-nft-multi"].Mode)
	}
	// The layer tar is well-formed and parents come before children.
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeLayerTar(pw, entries)) }()
	tr := tar.NewReader(pr)
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(h.Name, "/")
		if dir := filepath.Dir(name); dir != "." && !seen[dir] {
			t.Errorf("%s before its parent", name)
		}
		seen[name] = true
	}
}

func TestInstallKindBase(t *testing.T) {
	files := kindFilesDir(t)
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// A merged-/usr root with some of the units Debian's systemd enables.
	for _, d := range []string{"usr/lib/systemd/system/multi-user.target.wants", "usr/lib/systemd/system/sysinit.target.wants",
		"usr/lib/systemd/system/sockets.target.wants", "etc/systemd/system/getty.target.wants", "usr/sbin", "usr/bin"} {
		must(os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	must(os.Symlink("usr/lib", filepath.Join(root, "lib")))
	must(os.Symlink("usr/sbin", filepath.Join(root, "sbin")))
	must(os.Symlink("../systemd-tmpfiles-setup.service", filepath.Join(root, "usr/lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service")))
	must(os.Symlink("../systemd-udevd-control.socket", filepath.Join(root, "usr/lib/systemd/system/sockets.target.wants/systemd-udevd-control.socket")))
	must(os.Symlink("../systemd-journald.socket", filepath.Join(root, "usr/lib/systemd/system/sockets.target.wants/systemd-journald.socket")))
	must(os.Symlink("/lib/systemd/system/getty@.service", filepath.Join(root, "etc/systemd/system/getty.target.wants/getty@tty1.service")))
	must(os.WriteFile(filepath.Join(root, "etc/systemd/journald.conf"), []byte("[Journal]\n"), 0o644))

	must(installKindBase(files, root))

	mode := func(p string) os.FileMode {
		fi, err := os.Lstat(filepath.Join(root, p))
		if err != nil {
			t.Errorf("%s: %v", p, err)
			return 0
		}
		return fi.Mode()
	}
	for p, want := range map[string]os.FileMode{
		"usr/local/bin/entrypoint":                             0o755,
		"kind/bin/mount-product-files.sh":                      0o755,
		"etc/containerd/config.toml":                           0o644,
		"etc/crictl.yaml":                                      0o644,
		"etc/systemd/system/kubelet.service":                   0o644,
		"etc/systemd/system/kubelet.service.d/10-kubeadm.conf": 0o644,
		"etc/sysctl.d/10-network-security.conf":                0o644,
		"etc/default/kubelet":                                  0o644,
	} {
		if got := mode(p); got != want {
			t.Errorf("%s: mode %v, want %v", p, got, want)
		}
	}
	if m := mode("kind"); m.Perm() != 0o755 || !m.IsDir() {
		t.Errorf("/kind: %v", m)
	}
	link := func(p string) string {
		l, err := os.Readlink(filepath.Join(root, p))
		if err != nil {
			t.Errorf("%s: %v", p, err)
		}
		return l
	}
	for p, want := range map[string]string{
		"sbin/init": "/usr/lib/systemd/systemd",
		"etc/systemd/system/multi-user.target.wants/kubelet.service":          "/etc/systemd/system/kubelet.service",
		"etc/systemd/system/multi-user.target.wants/containerd.service":       "/etc/systemd/system/containerd.service",
		"etc/systemd/system/multi-user.target.wants/undo-mount-hacks.service": "/etc/systemd/system/undo-mount-hacks.service",
		"etc/systemd/system/systemd-binfmt.service":                           "/dev/null",
	} {
		if got := link(p); got != want {
			t.Errorf("%s -> %s, want %s", p, got, want)
		}
	}
	for _, gone := range []string{
		"usr/lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service",
		"usr/lib/systemd/system/sockets.target.wants/systemd-udevd-control.socket",
		"etc/systemd/system/getty.target.wants/getty@tty1.service",
	} {
		if _, err := os.Lstat(filepath.Join(root, gone)); err == nil {
			t.Errorf("%s not removed", gone)
		}
	}
	if _, err := os.Lstat(filepath.Join(root, "usr/lib/systemd/system/sockets.target.wants/systemd-journald.socket")); err != nil {
		t.Errorf("journald socket removed: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "etc/systemd/journald.conf")); !strings.HasSuffix(string(b), "ReadKMsg=no\n") {
		t.Errorf("journald.conf: %q", b)
	}
	if fi, err := os.Stat(filepath.Join(root, "etc/kubernetes/manifests")); err != nil || !fi.IsDir() {
		t.Errorf("/etc/kubernetes/manifests: %v", err)
	}
}

func TestWantedBy(t *testing.T) {
	unit := "[Unit]\nWantedBy=nope.target\n[Install]\nWantedBy=multi-user.target graphical.target\nWantedBy = other.target\n"
	if got := wantedBy(unit); !reflect.DeepEqual(got, []string{"multi-user.target", "graphical.target", "other.target"}) {
		t.Errorf("%v", got)
	}
}

func TestImageMetadata(t *testing.T) {
	v := version.MustParseSemantic("v1.37.2")
	if ImageName(v) != "skewtest/kind-node:v1.37.2" {
		t.Error(ImageName(v))
	}
	img := Image{Entrypoint: nodeEntrypoint, Env: nodeEnv, StopSignal: nodeStopSignal}
	ch := img.ImportChanges()
	if ch[0] != `ENTRYPOINT ["/usr/local/bin/entrypoint","/sbin/init"]` || ch[1] != "ENV container=docker" {
		t.Errorf("%q", ch)
	}
	if img.StopSignal != "SIGRTMIN+3" {
		t.Error(img.StopSignal)
	}
}

func TestStoreContainerdConfig(t *testing.T) {
	cfg := storeContainerdConfig("/r/var/lib/containerd", "/t/state", "/t/c.sock", "/t/opt")
	for _, want := range []string{`root = "/r/var/lib/containerd"`, `"io.containerd.grpc.v1.cri"`, `"io.containerd.cri.v1.runtime"`, `address = "/t/c.sock"`, `path = "/t/opt"`} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config lacks %s:\n%s", want, cfg)
		}
	}
	if m := missingImages([]string{"a", "b"}, []string{"b", "c"}); !reflect.DeepEqual(m, []string{"c"}) {
		t.Errorf("missingImages: %v", m)
	}
}

func TestReadCachedRejectsIncomplete(t *testing.T) {
	v := version.MustParseSemantic("v1.37.2")
	const own = "0123abcd"
	dir := t.TempDir()
	if _, err := readCached(dir, v, own); err == nil {
		t.Error("empty dir accepted")
	}
	img := Image{Version: "v1.37.2", Recipe: recipe, Size: 3, Own: own}
	b, _ := json.Marshal(img)
	if err := os.WriteFile(filepath.Join(dir, imageJSON), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readCached(dir, v, own); err == nil {
		t.Error("missing tar accepted")
	}
	if err := os.WriteFile(filepath.Join(dir, rootfsTar), []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readCached(dir, v, own)
	if err != nil || got.RootfsTar != filepath.Join(dir, rootfsTar) {
		t.Errorf("%+v %v", got, err)
	}
	if _, err := readCached(dir, version.MustParseSemantic("v1.36.3"), own); err == nil {
		t.Error("other version accepted")
	}
	if _, err := readCached(dir, v, "4567ef"); err == nil || !strings.Contains(err.Error(), "other builds of kindcni and podbin") {
		t.Errorf("an image with other builds of our own programs: %v, want it refused", err)
	}
	img.Recipe = recipe - 1
	b, _ = json.Marshal(img)
	_ = os.WriteFile(filepath.Join(dir, imageJSON), b, 0o644)
	if _, err := readCached(dir, v, own); err == nil {
		t.Error("old recipe accepted")
	}
}

// TestOwnDigest: our own programs' digest follows their bytes and names,
// and a rebuild of the same source gives the same one (no commit stamped
// in), so a new commit alone does not make the cached node image stale.
func TestOwnDigest(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, err := ownDigest(map[string]string{"kindcni": write("a", "cni"), "podbin": write("b", "pause")})
	if err != nil {
		t.Fatal(err)
	}
	same, _ := ownDigest(map[string]string{"podbin": write("c", "pause"), "kindcni": write("d", "cni")})
	other, _ := ownDigest(map[string]string{"kindcni": write("e", "cni"), "podbin": write("f", "pause2")})
	swapped, _ := ownDigest(map[string]string{"kindcni": write("g", "pause"), "podbin": write("h", "cni")})
	if a != same {
		t.Errorf("the same programs give digests %s and %s", a, same)
	}
	if a == other || a == swapped {
		t.Errorf("other programs give the same digest %s", a)
	}
	if _, err := ownDigest(map[string]string{"kindcni": filepath.Join(dir, "missing")}); err == nil {
		t.Error("a missing program has a digest")
	}
	if testing.Short() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	own := filepath.Join(t.TempDir(), "own")
	var sums []string
	for range 2 {
		built, err := ownPrograms(ctx, own)
		if err != nil {
			t.Fatal(err)
		}
		sum, err := ownDigest(built)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, sum)
	}
	if sums[0] != sums[1] {
		t.Errorf("two builds of the same source give digests %s and %s", sums[0], sums[1])
	}
}
