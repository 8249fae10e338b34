package skewrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// apiDumpTimeout bounds reading the API objects for a run's evidence; it
// runs after the run, and maybe after its deadline.
const apiDumpTimeout = 30 * time.Second

// apiDumps are the objects every provider's run keeps as evidence, one
// YAML file each in the logs' api/ directory: what the control plane
// thought of the pods and their volumes when the run ended. A pod that
// never ran is explained here (its conditions, the scheduler's and the
// controllers' events), not in the node's logs.
var apiDumps = []struct {
	file string
	list func(ctx context.Context, cs kubernetes.Interface) (runtime.Object, error)
}{
	{"pods.yaml", func(ctx context.Context, cs kubernetes.Interface) (runtime.Object, error) {
		return cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	}},
	{"events.yaml", func(ctx context.Context, cs kubernetes.Interface) (runtime.Object, error) {
		return cs.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	}},
	{"persistentvolumeclaims.yaml", func(ctx context.Context, cs kubernetes.Interface) (runtime.Object, error) {
		return cs.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	}},
	{"persistentvolumes.yaml", func(ctx context.Context, cs kubernetes.Interface) (runtime.Object, error) {
		return cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	}},
	{"volumeattachments.yaml", func(ctx context.Context, cs kubernetes.Interface) (runtime.Object, error) {
		return cs.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	}},
	{"statefulsets.yaml", func(ctx context.Context, cs kubernetes.Interface) (runtime.Object, error) {
		return cs.AppsV1().StatefulSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	}},
	{"nodes.yaml", func(ctx context.Context, cs kubernetes.Interface) (runtime.Object, error) {
		return cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	}},
}

// dumpAPIObjects writes apiDumps into dir/api. It is called before
// teardown, so it sees the objects the run left.
func dumpAPIObjects(ctx context.Context, cs kubernetes.Interface, dir string) error {
	ctx, cancel := context.WithTimeout(ctx, apiDumpTimeout)
	defer cancel()
	dir = filepath.Join(dir, "api")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var errs []error
	for _, d := range apiDumps {
		obj, err := d.list(ctx, cs)
		if err == nil {
			var b []byte
			if b, err = yaml.Marshal(obj); err == nil {
				err = os.WriteFile(filepath.Join(dir, d.file), b, 0o644)
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d.file, err))
		}
	}
	return errors.Join(errs...)
}
