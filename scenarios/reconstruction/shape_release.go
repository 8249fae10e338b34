package reconstruction

// This file checks that the shapes' volumes no pod uses are released:
// unstaged and, when the driver attaches, detached (their
// VolumeAttachments gone).

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/klient/wait"

	"sigs.k8s.io/skewtest/clusters/storage"
	"sigs.k8s.io/skewtest/reports"
	"sigs.k8s.io/skewtest/scenarios"
)

func (s *Scenario) volumeAttachments(ctx context.Context) ([]storagev1.VolumeAttachment, error) {
	var list storagev1.VolumeAttachmentList
	if err := s.res.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list VolumeAttachments: %w", err)
	}
	var out []storagev1.VolumeAttachment
	for _, va := range list.Items {
		if va.Spec.NodeName == s.node.String() {
			out = append(out, va)
		}
	}
	sort.Slice(out, func(i, j int) bool { return vaPV(out[i]) < vaPV(out[j]) })
	return out, nil
}

func vaPV(va storagev1.VolumeAttachment) string {
	if va.Spec.Source.PersistentVolumeName != nil {
		return *va.Spec.Source.PersistentVolumeName
	}
	return ""
}

func describeVAs(vas []storagev1.VolumeAttachment) string {
	var b strings.Builder
	for _, va := range vas {
		fmt.Fprintf(&b, "%s pv=%s node=%s attached=%t metadata=%v deleting=%t\n", va.Name, vaPV(va), va.Spec.NodeName, va.Status.Attached, va.Status.AttachmentMetadata, va.DeletionTimestamp != nil)
	}
	if b.Len() == 0 {
		return "none\n"
	}
	return b.String()
}

// waitReleased waits until a CSI volume no pod uses is unstaged (no
// global mount) and, when the driver attaches, detached (no
// VolumeAttachment), and says what it saw.
func (s *Scenario) waitReleased(ctx context.Context, sc *scenarios.StepContext, driver, handle, pv string) (bool, string) {
	start := time.Now()
	var why string
	cond := func(ctx context.Context) (bool, error) {
		snap, err := s.snapshot(ctx, sc.QuietNode)
		if err != nil {
			why = err.Error()
			return false, nil
		}
		if path, n := snap.CSIGlobalMount(driver, handle); n > 0 {
			why = fmt.Sprintf("global mount %s still mounted %d times", path, n)
			return false, nil
		}
		if !s.shapes.attaching {
			return true, nil
		}
		vas, err := s.volumeAttachments(ctx)
		if err != nil {
			why = err.Error()
			return false, nil
		}
		for _, va := range vas {
			if vaPV(va) == pv {
				why = fmt.Sprintf("unstaged, but VolumeAttachment %s still there (attached=%t)", va.Name, va.Status.Attached)
				return false, nil
			}
		}
		return true, nil
	}
	if err := wait.For(cond, wait.WithContext(ctx), wait.WithTimeout(s.scaled(releaseWait)), wait.WithInterval(s.cfg.PollInterval), wait.WithImmediate()); err != nil {
		return false, fmt.Sprintf("%s after %s", why, s.scaled(releaseWait))
	}
	what := "unstaged"
	if s.shapes.attaching {
		what += " and detached"
	}
	return true, fmt.Sprintf("%s %s after this step began", what, time.Since(start).Round(100*time.Millisecond))
}

// releaseShapes runs after the StatefulSet is gone: every shape volume is
// unstaged and detached, the block volumes' loop devices other than the
// driver's attachments are gone, and the shapes' API objects are removed.
func (s *Scenario) releaseShapes(ctx context.Context, sc *scenarios.StepContext) error {
	sh := s.shapes
	var errs []string
	driver := sh.driver
	for _, pv := range sh.gen.PVs {
		if ok, why := s.waitReleased(ctx, sc, driver, pv.VolumeHandle, pv.Name); !ok {
			errs = append(errs, fmt.Sprintf("ephemeral PV %s: %s", pv.Name, why))
		}
	}
	if sh.has[ShapeBlock] {
		var last string
		cond := func(ctx context.Context) (bool, error) {
			snap, err := s.snapshot(ctx, sc.QuietNode)
			if err != nil {
				last = err.Error()
				return false, nil
			}
			var still []string
			for _, pv := range sh.block.PVs {
				for _, m := range snap.Mounts() {
					if strings.Contains(m.MountPoint, "/volumeDevices/") && strings.Contains(m.MountPoint, pv.Name) {
						still = append(still, "mount "+m.MountPoint)
					}
				}
			}
			loops, err := s.blockLoops(ctx, sc, snap)
			if err != nil {
				last = err.Error()
				return false, nil
			}
			for _, d := range loops {
				if strings.HasPrefix(d.BackingFile, snap.Abs("plugins")+"/") {
					still = append(still, "kubelet loop device "+d.Path+" backed by "+d.BackingFile)
				}
			}
			if sh.attaching {
				vas, err := s.volumeAttachments(ctx)
				if err != nil {
					last = err.Error()
					return false, nil
				}
				for _, va := range vas {
					for _, pv := range sh.block.PVs {
						if vaPV(va) == pv.Name {
							still = append(still, "VolumeAttachment "+va.Name)
						}
					}
				}
			}
			last = strings.Join(still, "; ")
			return len(still) == 0, nil
		}
		if err := wait.For(cond, wait.WithContext(ctx), wait.WithTimeout(s.scaled(releaseWait)), wait.WithInterval(s.cfg.PollInterval), wait.WithImmediate()); err != nil {
			errs = append(errs, fmt.Sprintf("block volumes %s not released after %s: %s", pvNames(sh.block), s.scaled(releaseWait), last))
		}
	}
	if sh.attaching {
		vas, err := s.volumeAttachments(ctx)
		if err == nil {
			sc.Evidence(reports.Evidence{Name: "VolumeAttachments after the workload is deleted", Kind: "api", Text: describeVAs(vas)})
		}
	}
	for _, v := range []storage.Volumes{sh.block, sh.gen} {
		if err := storage.Release(ctx, s.cs, s.cfg.Namespace, v, s.cfg.CleanupTimeout, s.cfg.PollInterval); err != nil {
			errs = append(errs, err.Error())
		}
	}
	meta := metav1.ObjectMeta{Name: shapeObjects, Namespace: s.cfg.Namespace}
	for _, err := range []error{s.res.Delete(ctx, &corev1.ConfigMap{ObjectMeta: meta}), s.res.Delete(ctx, &corev1.Secret{ObjectMeta: meta})} {
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("shape volumes after the workload was deleted: %s", strings.Join(errs, "; "))
	}
	sc.Note("every shape volume unstaged%s; the block volumes' kubelet loop devices gone", map[bool]string{true: " and detached", false: ""}[sh.attaching])
	return s.setMade(s.namespaceOnly())
}
