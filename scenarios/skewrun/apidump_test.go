package skewrun

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"sigs.k8s.io/skewtest/reports"
)

// ownerSecret is a password the cluster's owner set inline in a pod's
// environment; runSecret one in the run's own workload.
const (
	ownerSecret = "owners-password-9f2c"
	runSecret   = "runs-token-77aa"
)

// sharedCluster holds the owner's workload (namespace prod, node
// owner-node, a PV and its attachment, a Secret) and the run's (namespace
// skewtest-trail-1 on test node w1).
func sharedCluster() []runtime.Object {
	env := func(v string) []corev1.EnvVar { return []corev1.EnvVar{{Name: "PASSWORD", Value: v}} }
	pod := func(ns, name, secret string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Annotations: map[string]string{corev1.LastAppliedConfigAnnotation: `{"env":"` + secret + `"}`}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Env: env(secret)}}, InitContainers: []corev1.Container{{Name: "i", Env: env(secret)}}}}
	}
	sts := func(ns, name, secret string) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: appsv1.StatefulSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Env: env(secret)}}}}}}
	}
	pv := func(name, ns string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{ClaimRef: &corev1.ObjectReference{Namespace: ns, Name: "data-web-0"}}}
	}
	va := func(name, pv, node string) *storagev1.VolumeAttachment {
		return &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.VolumeAttachmentSpec{NodeName: node, Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}}}
	}
	return []runtime.Object{
		pod("prod", "db-0", ownerSecret), sts("prod", "db", ownerSecret),
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "data-db-0"}},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "db-0.1"}, Message: "owner event"},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "db"}, StringData: map[string]string{"password": ownerSecret}},
		pv("pv-owner", "prod"), va("va-owner", "pv-owner", "w1"),
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "owner-node"}},

		pod("skewtest-trail-1", "web-0", runSecret), sts("skewtest-trail-1", "web", runSecret),
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "skewtest-trail-1", Name: "data-web-0"}},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "skewtest-trail-1", Name: "web-0.1"}, Message: "run event"},
		pv("pv-run", "skewtest-trail-1"), va("va-run", "pv-run", "w1"),
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1"}},
	}
}

// readDump is every file of dir/api, by name.
func readDump(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, d := range apiDumps {
		b, err := os.ReadFile(filepath.Join(dir, "api", d.file))
		if err != nil {
			t.Fatal(err)
		}
		out[d.file] = string(b)
	}
	return out
}

// On a cluster the run shares with its owner, the dump holds the run's
// namespaces, the PVs bound there and their attachments, and the test
// nodes: nothing of the owner's, and no environment value of anyone's.
func TestAPIDumpOfASharedClusterHoldsTheRunOnly(t *testing.T) {
	cs := fake.NewClientset(sharedCluster()...)
	dir := t.TempDir()
	scope := &apiScope{namespaces: []string{"skewtest-trail-1"}, nodes: []string{"w1"}}
	if err := dumpAPIObjects(context.Background(), cs, dir, scope, reports.MaxLogBytes); err != nil {
		t.Fatal(err)
	}
	got := readDump(t, dir)
	for file, want := range map[string]string{
		"pods.yaml": "web-0", "statefulsets.yaml": "name: web", "persistentvolumeclaims.yaml": "data-web-0", "events.yaml": "run event",
		"persistentvolumes.yaml": "pv-run", "volumeattachments.yaml": "va-run", "nodes.yaml": "name: w1",
	} {
		if !strings.Contains(got[file], want) {
			t.Errorf("%s lacks the run's %q:\n%s", file, want, got[file])
		}
	}
	for file, text := range got {
		for _, owner := range []string{"prod", "db-0", "pv-owner", "va-owner", "owner-node", "owner event", ownerSecret, runSecret} {
			if strings.Contains(text, owner) {
				t.Errorf("%s holds %q, which is not the run's to keep:\n%s", file, owner, text)
			}
		}
	}
	if !strings.Contains(got["pods.yaml"], envValueNotKept) {
		t.Errorf("pods.yaml does not say the environment's values were not kept:\n%s", got["pods.yaml"])
	}

	// A run that made no namespace there dumps none of the owner's.
	dir = t.TempDir()
	if err := dumpAPIObjects(context.Background(), cs, dir, &apiScope{nodes: []string{"w1"}}, reports.MaxLogBytes); err != nil {
		t.Fatal(err)
	}
	if got := readDump(t, dir)["pods.yaml"]; got != noNamespaceDump {
		t.Errorf("pods.yaml with no namespace of the run's = %q", got)
	}
}

// On a cluster of the run's own everything is dumped, still with no
// environment value; and each file is cut at the limit, saying so.
func TestAPIDumpOfOwnClusterIsWholeAndCapped(t *testing.T) {
	cs := fake.NewClientset(sharedCluster()...)
	dir := t.TempDir()
	if err := dumpAPIObjects(context.Background(), cs, dir, nil, reports.MaxLogBytes); err != nil {
		t.Fatal(err)
	}
	got := readDump(t, dir)
	if !strings.Contains(got["pods.yaml"], "db-0") || !strings.Contains(got["nodes.yaml"], "owner-node") {
		t.Errorf("the dump of the run's own cluster left objects out:\n%s\n%s", got["pods.yaml"], got["nodes.yaml"])
	}
	for file, text := range got {
		if strings.Contains(text, ownerSecret) || strings.Contains(text, runSecret) {
			t.Errorf("%s holds an environment value:\n%s", file, text)
		}
	}
	dir = t.TempDir()
	if err := dumpAPIObjects(context.Background(), cs, dir, nil, 64); err != nil {
		t.Fatal(err)
	}
	pods := readDump(t, dir)["pods.yaml"]
	if len(pods) > 64+200 || !strings.Contains(pods, "[skewtest cut this file here") {
		t.Errorf("pods.yaml capped at 64 bytes = %q", pods)
	}
}

// The scope of a shared cluster's dump is the namespaces the run's
// scenarios noted, each once; a cluster of the run's own has none.
func TestAPIScope(t *testing.T) {
	var events []string
	b := borrowed{events: &events}
	c := &runCluster{Provider: &sharedBorrowed{b}, v: &validated{Options: Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}}
	for _, ns := range []string{"skewtest-trail-2", "skewtest-trail-1", "skewtest-trail-2"} {
		c.noteNamespace(ns)
	}
	s := c.apiScope(context.Background())
	if s == nil || strings.Join(s.namespaces, ",") != "skewtest-trail-1,skewtest-trail-2" {
		t.Errorf("apiScope of a shared cluster = %+v, want the two namespaces the run used", s)
	}
	c.Provider = &b
	if s := c.apiScope(context.Background()); s != nil {
		t.Errorf("apiScope of the run's own cluster = %+v, want nil (everything)", s)
	}
}
