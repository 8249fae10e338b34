package skewrun

import (
	"reflect"
	"testing"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios/plan"
)

func TestKubeletSpecs(t *testing.T) {
	pl, err := plan.Parse("v1.37.2,v1.36.3,v1.37.2")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		source   string
		kubelets []string
		want     []string
	}{
		{source: "", want: []string{"module:v1.37.2", "module:v1.36.3", "module:v1.37.2"}},
		{source: "release", want: []string{"release:v1.37.2", "release:v1.36.3", "release:v1.37.2"}},
		{source: "kindest", want: []string{"image:kindest/node:v1.37.2", "image:kindest/node:v1.36.3", "image:kindest/node:v1.37.2"}},
		// A bare version in KUBELETS comes from KUBELET_SOURCE, as PLAN's
		// do; release: downloads whatever the source.
		{source: "kindest", kubelets: []string{"file:/k", "v1.36.3", "file:/k"}, want: []string{"file:/k", "image:kindest/node:v1.36.3", "file:/k"}},
		{kubelets: []string{"v1.37.2", " 1.36.3", "release:v1.37.2"}, want: []string{"module:v1.37.2", "module:v1.36.3", "release:v1.37.2"}},
		{source: "release", kubelets: []string{"v1.37.2", "module:v1.36.3", "patch:/d/fix.diff@v1.37.2"}, want: []string{"release:v1.37.2", "module:v1.36.3", "patch:/d/fix.diff@v1.37.2"}},
		{kubelets: []string{"latest-1.37", "ci/latest-1.38", "v1.38.0-alpha.1.5+abc"}, want: []string{"latest-1.37", "ci/latest-1.38", "v1.38.0-alpha.1.5+abc"}},
	} {
		got, err := kubeletSpecs(pl, Options{KubeletSource: tc.source, Kubelets: tc.kubelets})
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("KUBELET_SOURCE=%q KUBELETS=%q: %q, %v; want %q", tc.source, tc.kubelets, got, err, tc.want)
		}
		for _, s := range got {
			if _, err := binaries.ParseSpec(s); err != nil {
				t.Errorf("KUBELET_SOURCE=%q gives %q, which does not parse: %v", tc.source, s, err)
			}
		}
	}
}

// The report's binaries say which diff a patched kubelet has, and keep a
// patched kubelet apart from another of the same version and source name.
func TestAppendBinaryKeepsThePatch(t *testing.T) {
	patched := binaries.Binary{Component: "kubelet", Version: "v1.37.2", Source: "patch:fix.diff@v1.37.2", SHA256: "aa", PatchSHA256: "bb", PatchFiles: "pkg/kubelet/kubelet.go"}
	other := patched
	other.SHA256, other.PatchSHA256 = "cc", "dd"
	got := appendBinary(appendBinary(appendBinary(nil, patched), patched), other)
	want := []reports.Binary{
		{Component: "kubelet", Version: "v1.37.2", Source: "patch:fix.diff@v1.37.2", SHA256: "aa", PatchSHA256: "bb", PatchFiles: "pkg/kubelet/kubelet.go"},
		{Component: "kubelet", Version: "v1.37.2", Source: "patch:fix.diff@v1.37.2", SHA256: "cc", PatchSHA256: "dd", PatchFiles: "pkg/kubelet/kubelet.go"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("appendBinary = %+v, want %+v", got, want)
	}
}
