package kops

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The EBS CSI driver kops installs, and kops's default StorageClass for it
// (gp3, encrypted, WaitForFirstConsumer).
const (
	ebsDriver           = "ebs.csi.aws.com"
	defaultStorageClass = "kops-csi-1-21"
)

// ebsSettleTimeout bounds the wait for every attachment of the run's
// volumes to leave attaching/detaching; ebsPoll is how often EC2 is asked.
const (
	ebsSettleTimeout = 2 * time.Minute
	ebsPoll          = time.Second
)

// ebsVolume is one PV's EBS volume as EC2 reports it.
type ebsVolume struct {
	PV       string `json:"pv"`
	VolumeID string `json:"volumeID"`
	// State is the volume's: creating, available, in-use, deleting, ...
	State string `json:"state"`
	// Attachment is its attachment to the worker's instance: attaching,
	// attached, detaching, detached, or empty when it has none there.
	Attachment string `json:"attachment,omitempty"`
	// Elsewhere names other instances it is attached to.
	Elsewhere []string `json:"elsewhere,omitempty"`
}

// ebsState is the run's EBS volumes at one moment of a hop.
type ebsState struct {
	When     string      `json:"when"`
	At       time.Time   `json:"at"`
	Instance string      `json:"instance"`
	Volumes  []ebsVolume `json:"volumes"`
	// Settled is how long the attachments took to leave
	// attaching/detaching, for the snapshots that wait.
	Settled time.Duration `json:"settled,omitempty"`
}

// String is the snapshot as one note of the report.
func (s ebsState) String() string {
	var vs []string
	for _, v := range s.Volumes {
		a := v.Attachment
		if a == "" {
			a = "not attached"
		}
		vs = append(vs, fmt.Sprintf("%s (%s): %s, %s to %s", v.VolumeID, v.PV, v.State, a, s.Instance))
	}
	if len(vs) == 0 {
		vs = []string{"no PV of driver " + ebsDriver}
	}
	settled := ""
	if s.Settled > 0 {
		settled = fmt.Sprintf(", settled in %s", s.Settled.Round(10*time.Millisecond))
	}
	return fmt.Sprintf("EBS %s (%s%s): %s", s.When, s.At.UTC().Format("15:04:05.000"), settled, strings.Join(vs, "; "))
}

// ebsSnapshot reads the run's PVs of driver ebs.csi.aws.com from the API
// server, and their volumes (by CSI volumeHandle, the EBS volume ID) from
// EC2. It is recorded in the provider's evidence.
func (p *provider) ebsSnapshot(ctx context.Context, instance, when string) (ebsState, error) {
	snap := ebsState{When: when, At: time.Now(), Instance: instance}
	cs, err := p.kubeClient()
	if err != nil {
		return snap, err
	}
	pvs, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return snap, fmt.Errorf("EBS evidence: list PVs: %w", err)
	}
	pvOf := map[string]string{}
	var ids []string
	for _, pv := range pvs.Items {
		if c := pv.Spec.CSI; c != nil && c.Driver == ebsDriver {
			pvOf[c.VolumeHandle] = pv.Name
			ids = append(ids, c.VolumeHandle)
		}
	}
	slices.Sort(ids)
	if len(ids) > 0 {
		pg := ec2.NewDescribeVolumesPaginator(p.clients.EC2, &ec2.DescribeVolumesInput{VolumeIds: ids})
		for pg.HasMorePages() {
			page, err := pg.NextPage(ctx)
			if err != nil {
				return snap, fmt.Errorf("EBS evidence: describe volumes %s: %w", strings.Join(ids, ", "), err)
			}
			for _, v := range page.Volumes {
				snap.Volumes = append(snap.Volumes, volumeState(v, pvOf[aws.ToString(v.VolumeId)], instance))
			}
		}
	}
	slices.SortFunc(snap.Volumes, func(a, b ebsVolume) int { return strings.Compare(a.VolumeID, b.VolumeID) })
	p.mu.Lock()
	p.evidence = append(p.evidence, snap)
	p.mu.Unlock()
	return snap, nil
}

func volumeState(v ec2types.Volume, pv, instance string) ebsVolume {
	vs := ebsVolume{PV: pv, VolumeID: aws.ToString(v.VolumeId), State: string(v.State)}
	for _, a := range v.Attachments {
		if aws.ToString(a.InstanceId) == instance {
			vs.Attachment = string(a.State)
		} else {
			vs.Elsewhere = append(vs.Elsewhere, aws.ToString(a.InstanceId)+" ("+string(a.State)+")")
		}
	}
	return vs
}

// moving says whether an attachment is between states.
func moving(vs ebsVolume) bool {
	return vs.Attachment == string(ec2types.VolumeAttachmentStateAttaching) || vs.Attachment == string(ec2types.VolumeAttachmentStateDetaching)
}

// ebsSettled polls the snapshot until no attachment of the run's volumes
// is attaching or detaching (EC2 reports changes late), and fails naming
// the volumes stuck after ebsSettleTimeout.
func (p *provider) ebsSettled(ctx context.Context, instance, when string) (ebsState, error) {
	start := time.Now()
	for {
		snap, err := p.ebsSnapshot(ctx, instance, when)
		if err != nil {
			return snap, err
		}
		var stuck []string
		for _, v := range snap.Volumes {
			if moving(v) {
				stuck = append(stuck, v.VolumeID+" ("+v.PV+") "+v.Attachment)
			}
		}
		snap.Settled = time.Since(start)
		if len(stuck) == 0 {
			p.setLastSettled(snap)
			return snap, nil
		}
		if time.Since(start) > p.settleTimeout {
			return snap, fmt.Errorf("EBS attachments stuck for %s on %s: %s", p.settleTimeout, instance, strings.Join(stuck, ", "))
		}
		select {
		case <-ctx.Done():
			return snap, context.Cause(ctx)
		case <-time.After(min(ebsPoll, p.clients.poll())):
		}
	}
}

// setLastSettled stores the settle time in the evidence's last entry.
func (p *provider) setLastSettled(s ebsState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.evidence); n > 0 {
		p.evidence[n-1].Settled = s.Settled
	}
}

// checkAttachments is what the scenario expects of EBS across a hop: the
// pods come back on the same node, so every volume attached to the worker
// before stays attached to it, and none is elsewhere.
func checkAttachments(before, after ebsState) error {
	now := map[string]ebsVolume{}
	for _, v := range after.Volumes {
		now[v.VolumeID] = v
	}
	var errs []error
	for _, b := range before.Volumes {
		if b.Attachment != string(ec2types.VolumeAttachmentStateAttached) {
			continue
		}
		a, ok := now[b.VolumeID]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("EBS volume %s (%s) was attached to %s %s and is gone %s", b.VolumeID, b.PV, before.Instance, before.When, after.When))
		case a.Attachment != string(ec2types.VolumeAttachmentStateAttached):
			errs = append(errs, fmt.Errorf("EBS volume %s (%s) was attached to %s %s, and is %q %s", b.VolumeID, b.PV, before.Instance, before.When, a.Attachment, after.When))
		case len(a.Elsewhere) > 0:
			errs = append(errs, fmt.Errorf("EBS volume %s (%s) is also attached to %s %s", b.VolumeID, b.PV, strings.Join(a.Elsewhere, ", "), after.When))
		}
	}
	return errors.Join(errs...)
}
