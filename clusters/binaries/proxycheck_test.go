package binaries

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
)

// proxyCheckVersions are the kubelets the reconstruction history names
// (see docs); SKEWTEST_PROXY_CHECK_VERSIONS overrides them.
var proxyCheckVersions = []string{"v1.26.15", "v1.27.9", "v1.27.16", "v1.28.5", "v1.29.6", "v1.30.14", "v1.31.14", "v1.32.13", "v1.33.13"}

// volumePackages are the kubelet packages volume reconstruction runs in,
// and the plugins of the volumes skewtest uses (CSI, local, and the
// kubelet's own configmap/secret/projected/emptyDir/hostPath volumes): a
// build tag the module build uses must leave them as they are.
var volumePackages = []string{
	"k8s.io/kubernetes/pkg/kubelet/volumemanager",
	"k8s.io/kubernetes/pkg/volume/util",
	"k8s.io/kubernetes/pkg/volume/csi",
	"k8s.io/kubernetes/pkg/volume/local",
	"k8s.io/kubernetes/pkg/volume/configmap",
	"k8s.io/kubernetes/pkg/volume/secret",
	"k8s.io/kubernetes/pkg/volume/projected",
	"k8s.io/kubernetes/pkg/volume/downwardapi",
	"k8s.io/kubernetes/pkg/volume/emptydir",
	"k8s.io/kubernetes/pkg/volume/hostpath",
	"k8s.io/kubernetes/pkg/volume/validation",
	"k8s.io/kubernetes/pkg/volume",
}

func isVolumePackage(p string) bool {
	for _, v := range volumePackages {
		if p == v || (v != "k8s.io/kubernetes/pkg/volume" && strings.HasPrefix(p, v+"/")) {
			return true
		}
	}
	return false
}

// TestProxyBuildability asks the real Go module proxy, for each version,
// whether the kubelet and the control plane can be built from the
// k8s.io/kubernetes module (the check Build makes; nothing is built), and
// lists the kubelet packages that -tags providerless changes. It downloads
// every version's k8s.io/kubernetes module (100+ MB each, into the module
// cache), so it runs only with SKEWTEST_PROXY_CHECK=1:
//
//	SKEWTEST_PROXY_CHECK=1 go test -count=1 -run TestProxyBuildability -v ./clusters/binaries/
func TestProxyBuildability(t *testing.T) {
	if os.Getenv("SKEWTEST_PROXY_CHECK") != "1" {
		t.Skip("set SKEWTEST_PROXY_CHECK=1 to ask the Go module proxy (downloads 100+ MB per version)")
	}
	versions := proxyCheckVersions
	if s := os.Getenv("SKEWTEST_PROXY_CHECK_VERSIONS"); s != "" {
		versions = strings.Split(s, ",")
	}
	components := []string{"kubelet", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}
	b := &ModuleBuilder{CacheDir: t.TempDir()}
	var table strings.Builder
	fmt.Fprintf(&table, "| version | not served (of required staging modules) | %s |\n|---|---|%s\n", strings.Join(components, " | "), strings.Repeat("---|", len(components)))
	var diffs strings.Builder
	for _, vs := range versions {
		v := version.MustParseSemantic(vs)
		ms, err := b.resolveModules(t.Context(), v, nil)
		if err != nil {
			fmt.Fprintf(&table, "| %s | error: %s |%s\n", vs, oneLineTrim(err.Error(), 200), strings.Repeat(" |", len(components)))
			continue
		}
		verdicts, err := ms.judge(components)
		if err != nil {
			t.Errorf("%s: %v", vs, err)
			continue
		}
		var notServed []string
		for _, m := range sortedKeys(ms.missing) {
			// "verifying go.mod": the proxy serves it, but the checksum
			// database has no entry for it, so the go command refuses it.
			if strings.Contains(ms.missing[m], "verifying") {
				m += " (no checksum entry)"
			}
			notServed = append(notServed, m)
		}
		row := []string{vs, fmt.Sprintf("%d of %d: %s", len(ms.missing), len(ms.missing)+len(ms.served), strings.Join(notServed, ", "))}
		for _, c := range components {
			row = append(row, verdicts[c].String())
		}
		fmt.Fprintf(&table, "| %s |\n", strings.Join(row, " | "))
		for _, c := range components {
			if vd := verdicts[c]; !vd.Buildable() {
				t.Logf("%s %s: %s", vs, c, refusalText(ms, vd))
			}
		}

		// What providerless changes in the kubelet (over the packages of
		// k8s.io/kubernetes and the served staging modules).
		im := newImporter(ms.roots())
		plain, err := im.walk("k8s.io/kubernetes/cmd/kubelet", nil)
		if err != nil {
			t.Errorf("%s: %v", vs, err)
			continue
		}
		pl, err := im.walk("k8s.io/kubernetes/cmd/kubelet", []string{providerlessTag})
		if err != nil {
			t.Errorf("%s: %v", vs, err)
			continue
		}
		d := diffClosures(plain, pl)
		fmt.Fprintf(&diffs, "\n%s kubelet: %d packages without providerless, %d with; %d only without, %d only with, %d with other files\n", vs, len(plain.Files), len(pl.Files), len(d.OnlyA), len(d.OnlyB), len(d.Files))
		for _, p := range d.OnlyA {
			fmt.Fprintf(&diffs, "  - %s\n", p)
			if isVolumePackage(p) && !isInTreeCloudPlugin(p) {
				t.Errorf("%s: providerless drops %s from the kubelet", vs, p)
			}
		}
		for _, p := range d.OnlyB {
			fmt.Fprintf(&diffs, "  + %s\n", p)
			if isVolumePackage(p) {
				t.Errorf("%s: providerless adds %s to the kubelet", vs, p)
			}
		}
		for _, p := range sortedKeys(d.Files) {
			fmt.Fprintf(&diffs, "  ~ %s: %s\n", p, strings.Join(d.Files[p], " "))
			if isVolumePackage(p) && !isInTreeCloudPlugin(p) {
				t.Errorf("%s: providerless changes the files of %s: %v", vs, p, d.Files[p])
			}
		}
		for _, m := range pl.MissingModules() {
			fmt.Fprintf(&diffs, "  (with providerless still imports, of the unserved %s: %s)\n", m, strings.Join(pl.MissingPackages[m], ", "))
		}
		if len(plain.Missing) > 0 {
			fmt.Fprintf(&diffs, "  (not walked, not served: %s)\n", strings.Join(plain.MissingModules(), ", "))
		}
	}
	t.Logf("verdicts (nothing built):\n%s", table.String())
	t.Logf("kubelet packages that -tags providerless changes (- only without it, + only with it, ~ other files):%s", diffs.String())
}

// isInTreeCloudPlugin says whether p is one of the in-tree cloud volume
// plugins that providerless is meant to drop.
func isInTreeCloudPlugin(p string) bool {
	for _, n := range []string{"awsebs", "gcepd", "azuredd", "azure_file", "cinder", "vsphere_volume", "portworx", "rbd", "cephfs", "flocker", "scaleio", "storageos", "quobyte", "glusterfs"} {
		if p == "k8s.io/kubernetes/pkg/volume/"+n || strings.HasPrefix(p, "k8s.io/kubernetes/pkg/volume/"+n+"/") {
			return true
		}
	}
	return false
}
