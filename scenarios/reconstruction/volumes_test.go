package reconstruction

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/reports"
)

func TestAddVolumesKeepsOneVolumeAsItWas(t *testing.T) {
	w := storage.Workload{Image: "localhost/skewtest/workload:v1", PullPolicy: "Never"}
	want := statefulSet("web", "ns", "node-1", 3, "sc", "16Mi", corev1.ReadWriteOnce, w)
	got := want.DeepCopy()
	addVolumes(got, 1)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("one volume per pod changed the StatefulSet:\n%+v\nwant\n%+v", got.Spec, want.Spec)
	}
	s := &Scenario{cfg: Config{Name: "web", Replicas: 3}}
	s.cfg.defaults()
	if got, want := s.allClaims(), []string{"data-web-0", "data-web-1", "data-web-2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("claims = %v, want %v", got, want)
	}
}

// One pod with many volumes: each volume its own claim template, named as
// the StatefulSet controller names the claims it makes (which providers
// pre-bind), and mounted in the pod; the rest of the pod is unchanged.
func TestAddVolumesManyPerPod(t *testing.T) {
	w := storage.Workload{Image: "localhost/skewtest/workload:v1", PullPolicy: "Never"}
	sts := statefulSet("web", "ns", "node-1", 1, "sc", "16Mi", corev1.ReadWriteOncePod, w)
	one := sts.DeepCopy()
	addVolumes(sts, 4)
	tmpls := sts.Spec.VolumeClaimTemplates
	if len(tmpls) != 4 {
		t.Fatalf("%d claim templates, want 4", len(tmpls))
	}
	mounts := sts.Spec.Template.Spec.Containers[0].VolumeMounts
	if len(mounts) != 4 {
		t.Fatalf("%d volume mounts, want 4: %+v", len(mounts), mounts)
	}
	for j, tmpl := range tmpls {
		name := volumeName
		if j > 0 {
			name = extraVolume(j)
		}
		if tmpl.Name != name || mounts[j].Name != name || mounts[j].MountPath != "/"+name {
			t.Errorf("volume %d: template %q mounted as %q at %q, want %q at /%s", j, tmpl.Name, mounts[j].Name, mounts[j].MountPath, name, name)
		}
		if !reflect.DeepEqual(tmpl.Spec, tmpls[0].Spec) {
			t.Errorf("volume %d's claim %+v differs from the first's %+v", j, tmpl.Spec, tmpls[0].Spec)
		}
	}
	// Nothing else of the pod changed: the marker stays on /data.
	sts.Spec.VolumeClaimTemplates = one.Spec.VolumeClaimTemplates
	sts.Spec.Template.Spec.Containers[0].VolumeMounts = one.Spec.Template.Spec.Containers[0].VolumeMounts
	if !reflect.DeepEqual(sts, one) {
		t.Errorf("more volumes changed more than the claims and mounts")
	}

	s := &Scenario{cfg: Config{Name: "web", Replicas: 2, VolumesPerPod: 3}}
	s.cfg.defaults()
	want := []string{"data-web-0", "data1-web-0", "data2-web-0", "data-web-1", "data1-web-1", "data2-web-1"}
	if got := s.allClaims(); !reflect.DeepEqual(got, want) {
		t.Errorf("claims = %v, want %v", got, want)
	}
}

func TestVolumesPerPodSteps(t *testing.T) {
	p := mustPlan(t, "v1.37.2,v1.36.3,v1.37.2")
	s, err := New(Config{Plan: p, Kubelets: make([]binaries.Binary, 3), Replicas: 1, VolumesPerPod: 128}, fakeCluster{}, fakeNode{}, &reports.Run{})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Steps()[0].Name; got != "deploy a StatefulSet of 1 pods with 128 csi volumes each" {
		t.Errorf("first step %q", got)
	}
	f := Faults()["reboot"]
	if _, err := New(Config{Plan: p, Kubelets: make([]binaries.Binary, 3), VolumesPerPod: 2, Fault: &f}, fakeCluster{}, fakeNode{}, &reports.Run{}); err == nil || !strings.Contains(err.Error(), "one volume per pod") {
		t.Errorf("a fault with 2 volumes per pod: %v, want refused", err)
	}
}
