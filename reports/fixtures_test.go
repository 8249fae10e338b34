package reports

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"time"
)

// Fixed instants keep every rendering deterministic.
var t0 = time.Date(2026, 11, 30, 7, 21, 0, 0, time.UTC)

// at is t0 plus s seconds.
func at(s float64) time.Time { return t0.Add(secs(s)) }

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func fakeSHA(s string) string { return fmt.Sprintf("%x", sha256.Sum256([]byte(s))) }

func step(index, hop int, name string, start, dur float64, v Verdict) Step {
	return Step{Index: index, Hop: hop, Name: name, Started: at(start), Finished: at(start + dur), Verdict: v}
}

func cmd(command, stdout, stderr string, exit int, start, dur float64) Command {
	return Command{Command: command, Stdout: stdout, Stderr: stderr, ExitCode: exit, Started: at(start), Duration: secs(dur)}
}

const (
	uidA = "0b6a2c4e-1f3d-4a5b-8c7d-9e0f1a2b3c4d"
	uidB = "5c8e1a2b-3d4f-4e6a-9b0c-1d2e3f4a5b6c"
	uidC = "7d3c5a10-2b4e-4f61-9a8c-0e1d2f3a4b5c"
	uidD = "9f0e1d2c-3b4a-4c5d-8e6f-7a8b9c0d1e2f"
)

// passingCSIRun: a CSI hostpath run, downgrade then upgrade, all passing.
func passingCSIRun() *Run {
	r := &Run{
		ID:       "20261130-072100-a1b2",
		Scenario: "csi-hostpath",
		Provider: "kind",
		Node:     "skewtest-worker",
		Plan:     []string{"v1.37.2", "v1.36.3", "v1.37.2"},
		Started:  t0,
		Finished: at(412.5),
		Environment: []KeyValue{
			{Key: "Host", Value: "ci-runner-7 (linux/amd64)"},
			{Key: "Kernel", Value: "6.12.8"},
			{Key: EnvCgroup, Value: "v2 (unified)"},
			{Key: EnvInitSystem, Value: "systemd"},
			{Key: "Go", Value: "go1.26.0"},
			{Key: "API server", Value: "v1.37.2"},
			{Key: "Container runtime", Value: "containerd://2.2.0"},
			{Key: "Volume kind", Value: "CSI (hostpath.csi.k8s.io)"},
			{Key: "Replicas", Value: "3"},
		},
		Binaries: []Binary{
			{Component: "kubelet", Version: "v1.37.2", Source: "https://dl.k8s.io/release/v1.37.2/bin/linux/amd64/kubelet", SHA256: fakeSHA("kubelet v1.37.2")},
			{Component: "kubelet", Version: "v1.36.3", Source: "https://dl.k8s.io/release/v1.36.3/bin/linux/amd64/kubelet", SHA256: fakeSHA("kubelet v1.36.3")},
		},
		ArtifactsDir:              "_artifacts/20261130-072100-a1b2",
		InitialReconstructionPath: "new",
	}

	s1 := step(1, 0, "resolve binaries", 0, 2.4, Pass)
	s1.Notes = []string{"kubelet v1.37.2 and v1.36.3 found in the cache"}

	s2 := step(2, 0, "create StatefulSet", 2.4, 24.6, Pass)
	s2.Commands = []Command{cmd("kubectl apply -f statefulset.yaml", "storageclass.storage.k8s.io/csi-hostpath created\nstatefulset.apps/web created\n", "", 0, 2.5, 0.8)}
	s2.Notes = []string{"3/3 pods Running after 21.4s"}

	r.Steps = []Step{s1, s2}
	hop := func(n int, from, to string, base float64, uids []string, cleanupDir float64) {
		stop := step(0, n, "stop kubelet and force-delete pods", base, 6.2, Pass)
		stop.Commands = []Command{
			cmd("systemctl stop kubelet", "", "", 0, base, 1.2),
			cmd("kubectl delete pod web-0 web-1 web-2 --force --grace-period=0",
				"pod \"web-0\" force deleted\npod \"web-1\" force deleted\npod \"web-2\" force deleted\n",
				"Warning: Immediate deletion does not wait for confirmation that the running resource has been terminated.\n", 0, base+1.3, 0.9),
		}
		swap := step(0, n, "swap kubelet binary and start kubelet", base+6.2, 3.1, Pass)
		swap.Commands = []Command{cmd("install -m 0755 /var/cache/skewtest/kubelet-"+to+" /usr/bin/kubelet && systemctl start kubelet", "", "", 0, base+6.3, 1.4)}
		swap.Notes = []string{"node Ready at " + to + " after 0.71s"}
		verify := step(0, n, "verify cleanup", base+9.3, cleanupDir+0.5, Pass)
		verify.Commands = []Command{cmd("findmnt -rn -o TARGET", "/\n/var/lib/containerd\n/var/lib/kubelet\n", "", 0, base+9.4, 0.1)}
		verify.Evidence = []Evidence{
			{Name: "node state after cleanup", Kind: "snapshot", Text: "mounts under /var/lib/kubelet/pods: none\nold pod dirs: none\n", Path: fmt.Sprintf("hop%d/node-after.txt", n)},
			{Name: "pod dirs before and after", Kind: "diff", Text: "-/var/lib/kubelet/pods/" + uids[0] + "\n-/var/lib/kubelet/pods/" + uids[1] + "\n", Path: fmt.Sprintf("hop%d/pod-dirs.diff", n)},
		}
		verify.Notes = []string{fmt.Sprintf("%d old pod dirs removed", len(uids))}
		r.Steps = append(r.Steps, stop, swap, verify)
	}
	hop(1, "v1.37.2", "v1.36.3", 27, []string{uidA, uidB}, 3.9)
	hop(2, "v1.36.3", "v1.37.2", 220, []string{uidC, uidD}, 12.34)
	for i := range r.Steps {
		r.Steps[i].Index = i + 1
	}
	r.Hops = []Hop{
		{
			Number: 1, From: "v1.37.2", To: "v1.36.3", Direction: "downgrade",
			OldPodUIDs:         []string{uidA, uidB},
			ReconstructionPath: "new",
			Timings: []Timing{
				{Phase: "kubelet stop", Duration: secs(1.24)},
				{Phase: "node Ready", Duration: secs(0.71)},
				{Phase: "old mounts gone", Duration: secs(3.42)},
				{Phase: "old pod dirs gone", Duration: secs(3.9)},
			},
			Metrics: []Metric{
				{Name: "reconstruct_volume_operations_total", Value: 2, Present: true, Expected: ">= 2", Verdict: Pass},
				{Name: "reconstruct_volume_operations_errors_total", Value: 0, Present: true, Expected: "0", Verdict: Pass},
				{Name: "force_cleaned_failed_volume_operations_total", Present: false, Reason: "informational; not exposed by v1.36.3"},
			},
		},
		{
			Number: 2, From: "v1.36.3", To: "v1.37.2", Direction: "upgrade",
			OldPodUIDs:         []string{uidC, uidD},
			ReconstructionPath: "new",
			Timings: []Timing{
				{Phase: "kubelet stop", Duration: secs(1.1)},
				{Phase: "node Ready", Duration: secs(0.65)},
				{Phase: "volume reconstructed", Duration: secs(2.1)},
				{Phase: "old mounts gone", Duration: secs(2.8)},
				{Phase: "old pod dirs gone", Duration: secs(12.34)},
			},
			Metrics: []Metric{
				{Name: "reconstruct_volume_operations_total", Value: 2, Present: true, Expected: ">= 2", Verdict: Pass},
				{Name: "reconstruct_volume_operations_errors_total", Value: 0, Present: true, Expected: "0", Verdict: Pass},
				{Name: "force_cleaned_failed_volume_operations_total", Value: 0, Present: true, Expected: "0", Verdict: Pass},
			},
		},
	}
	r.ComputeVerdict()
	return r
}

const localReason = "local PVs have no driver to confirm the device, so reconstruction fails for each old pod and the kubelet cleans up by unmounting the path"

// localVolumeRun: a local-volume upgrade that passes with documented
// deviations.
func localVolumeRun() *Run {
	r := &Run{
		ID:       "20261130-080000-c3d4",
		Scenario: "local-volume",
		Provider: "ec2",
		Node:     "ip-10-0-1-17.ec2.internal",
		Plan:     []string{"v1.36.3", "v1.37.2"},
		Started:  t0,
		Finished: at(185.25),
		Environment: []KeyValue{
			{Key: "Kernel", Value: "6.8.0-1019-aws"},
			{Key: "Container runtime", Value: "containerd://2.2.0 | runc 1.3.0"},
			{Key: "Volume kind", Value: "local (kubernetes.io/no-provisioner)"},
			{Key: "Replicas", Value: "3"},
		},
		Binaries: []Binary{
			{Component: "kubelet", Version: "v1.36.3", Source: "go build k8s.io/kubernetes/cmd/kubelet@v1.36.3", SHA256: fakeSHA("kubelet v1.36.3 built")},
			{Component: "kubelet", Version: "v1.37.2", Source: "go build k8s.io/kubernetes/cmd/kubelet@v1.37.2", SHA256: fakeSHA("kubelet v1.37.2 built")},
		},
	}
	s1 := step(1, 0, "create StatefulSet", 0, 30, Pass)
	s2 := step(2, 1, "stop kubelet and force-delete pods", 30, 5.5, Pass)
	s3 := step(3, 1, "swap kubelet binary and start kubelet", 35.5, 2.9, Pass)
	s4 := step(4, 1, "verify cleanup", 38.4, 15, PassWithExpectedDeviations)
	s4.Deviations = []Deviation{{
		Check:    "old mounts gone within 10s",
		Expected: "<= 10s",
		Observed: "14.20s",
		Reason:   "unmount by path waits for the next reconcile | retry loop (~2s each) after reconstruction fails",
	}}
	s4.Notes = []string{"3 old pod dirs removed after 14.61s"}
	s5 := step(5, 1, "read kubelet metrics", 53.4, 0.6, PassWithExpectedDeviations)
	s5.Commands = []Command{cmd("curl -sk https://127.0.0.1:10250/metrics | grep ^reconstruct_volume",
		"reconstruct_volume_operations_errors_total 3\nreconstruct_volume_operations_total 3\n", "", 0, 53.4, 0.3)}
	s5.Evidence = []Evidence{{Name: "kubelet metrics", Kind: "metrics", Path: "hop1/metrics.txt"}}
	r.Steps = []Step{s1, s2, s3, s4, s5}
	r.Hops = []Hop{{
		Number: 1, From: "v1.36.3", To: "v1.37.2", Direction: "upgrade",
		OldPodUIDs:         []string{uidA, uidB, uidC},
		ReconstructionPath: "none seen (log level below 2)",
		Timings: []Timing{
			{Phase: "kubelet stop", Duration: secs(1.3)},
			{Phase: "node Ready", Duration: secs(0.8)},
			{Phase: "old mounts gone", Duration: secs(14.2)},
			{Phase: "old pod dirs gone", Duration: secs(14.61)},
		},
		Metrics: []Metric{
			{Name: "reconstruct_volume_operations_total", Value: 3, Present: true, Expected: ">= 3", Verdict: Pass},
			{Name: "reconstruct_volume_operations_errors_total", Value: 3, Present: true, Expected: "0", Verdict: PassWithExpectedDeviations, Reason: localReason},
		},
	}}
	r.ComputeVerdict()
	return r
}

// failedRunStdout holds what a report must not let loose: a fence, table
// pipes and control characters.
const failedRunStdout = "```\n" +
	"/var/lib/kubelet/pods/" + uidC + "/volumes/kubernetes.io~csi/pvc-4e5f6a7b/mount | /dev/loop3 | rw\n" +
	"| a | b |\n" +
	"bell:\x07 nul:\x00 colour:\x1b[31mred\x1b[0m\n" +
	"```\n"

// failedRun: the first hop leaves a pod dir behind; later steps are
// skipped.
func failedRun() *Run {
	r := &Run{
		ID:       "20261130-090000-e5f6",
		Scenario: "csi-block",
		Provider: "kind",
		Node:     "skewtest-worker",
		Plan:     []string{"v1.37.2", "v1.36.3", "v1.37.2"},
		Started:  t0,
		Finished: at(163.8),
		Environment: []KeyValue{
			{Key: "Volume kind", Value: "CSI raw block"},
			{Key: "Replicas", Value: "1"},
		},
		Binaries: []Binary{
			{Component: "kubelet", Version: "v1.37.2", Source: "/var/cache/skewtest/kubelet-v1.37.2", SHA256: fakeSHA("a")},
			{Component: "kubelet", Version: "v1.36.3", Source: "patch:skip-unmount.diff@v1.36.3", SHA256: fakeSHA("b"),
				PatchSHA256: fakeSHA("skip-unmount.diff"), PatchFiles: "pkg/kubelet/volumemanager/reconciler/reconciler_common.go,pkg/volume/util/operationexecutor/operation_generator.go"},
		},
	}
	var journal strings.Builder
	for i := 1; i <= 55; i++ {
		fmt.Fprintf(&journal, "Nov 30 07:21:%02d skewtest-worker kubelet[812]: I1130 reconciler.go:%d line %d\n", i%60, 100+i, i)
	}
	podDir := "/var/lib/kubelet/pods/" + uidC
	s1 := step(1, 0, "create StatefulSet", 0, 20, Pass)
	s2 := step(2, 1, "stop kubelet and force-delete pods", 20, 4, Pass)
	s3 := step(3, 1, "swap kubelet binary and start kubelet", 24, 3, Pass)
	s3.Commands = []Command{cmd("journalctl -u kubelet --since=-1min --no-pager", journal.String(), "", 0, 26, 0.4)}
	s4 := step(4, 1, "verify cleanup", 27, 121.5, Fail)
	s4.Error = "pod " + uidC + ": " + podDir + "/volumes/kubernetes.io~csi/pvc-4e5f6a7b/mount still mounted 120s after kubelet start"
	s4.Commands = []Command{
		cmd("findmnt -rn -o TARGET,SOURCE,OPTIONS | grep "+uidC, failedRunStdout, "", 0, 147, 0.1),
		cmd("rmdir "+podDir, "", "rmdir: failed to remove '"+podDir+"': Directory not empty\n", 1, 147.2, 0.05),
	}
	s4.Evidence = []Evidence{{Name: "node state", Kind: "snapshot", Text: "old pod dirs: " + podDir + "\nold mounts: 1\n", Path: "hop1/node-after.txt"}}
	s4.Deviations = []Deviation{{Check: "old pod dirs gone", Expected: "within 120s of kubelet start", Observed: podDir + " still present"}}
	s5 := step(5, 1, "read kubelet metrics", 0, 0, Skipped)
	s5.Started, s5.Finished = time.Time{}, time.Time{}
	r.Steps = []Step{s1, s2, s3, s4, s5}
	for i, name := range []string{"stop kubelet and force-delete pods", "swap kubelet binary and start kubelet", "verify cleanup"} {
		r.Steps = append(r.Steps, Step{Index: 6 + i, Hop: 2, Name: name, Verdict: Skipped})
	}
	r.Hops = []Hop{
		{
			Number: 1, From: "v1.37.2", To: "v1.36.3", Direction: "downgrade",
			OldPodUIDs:         []string{uidC},
			ReconstructionPath: "new",
			Timings: []Timing{
				{Phase: "kubelet stop", Duration: secs(1.3)},
				{Phase: "node Ready", Duration: secs(0.8)},
			},
		},
		{Number: 2, From: "v1.36.3", To: "v1.37.2", Direction: "upgrade"},
	}
	r.ComputeVerdict()
	return r
}

// gatedSignoffRun replays KEP-3756's sign-off on one binary: v1.28.15,
// then v1.28.15 with NewVolumeManagerReconstruction=false (the old
// reconstruction, as 1.27.9 ran it), then v1.28.15 again; each kubelet's
// path read from its log.
func gatedSignoffRun() *Run {
	const gate = "NewVolumeManagerReconstruction"
	r := &Run{
		ID:       "20261201-101500-9a8b",
		Scenario: "reconstruction-csi",
		Provider: "local",
		Node:     "skewtest-node-0",
		Plan:     []string{"v1.28.15", "v1.28.15+" + gate + "=false", "v1.28.15"},
		Started:  t0,
		Finished: at(96),
		Environment: []KeyValue{
			{Key: "API server", Value: "v1.28.15"},
			{Key: "Volume kind", Value: "CSI (csi.skewtest.k8s.io)"},
		},
		Binaries: []Binary{
			{Component: "kubelet", Version: "v1.28.15", Source: "module:v1.28.15", SHA256: fakeSHA("kubelet v1.28.15")},
		},
		InitialReconstructionPath: "new",
	}
	s1 := step(1, 0, "snapshot node state (before)", 0, 0.4, Pass)
	s1.Notes = []string{"kubelet v1.28.15 at its start: the kubelet ran the new reconstruction (KEP-3756): 1 lines only it logs"}
	s2 := step(2, 1, "hop 1: swap kubelet binary to v1.28.15+"+gate+"=false", 10, 0.2, Pass)
	s2.Notes = []string{"kubelet configuration sets featureGates {" + gate + ": false}"}
	s3 := step(3, 1, "hop 1: wait until the old pods' mounts and directories are gone", 12, 5.1, Pass)
	s3.Evidence = []Evidence{{Name: "the kubelet's reconstruction path since its start", Kind: "log",
		Text: "reconstruction path: old\n0 new-path lines:\n3 old-path lines:\n" +
			`I1201 10:15:12.532667   31877 reconstruct.go:102] "Reconciler sync states: could not find pod information in desired state, update it in actual state"` + "\n"}}
	s4 := step(4, 2, "hop 2: swap kubelet binary to v1.28.15", 40, 0.2, Pass)
	s5 := step(5, 2, "hop 2: wait until the old pods' mounts and directories are gone", 42, 4.2, Pass)
	r.Steps = []Step{s1, s2, s3, s4, s5}
	r.Hops = []Hop{
		{Number: 1, From: "v1.28.15", To: "v1.28.15", Direction: "same", ToGates: map[string]bool{gate: false},
			ReconstructionPath: "old", Timings: []Timing{{Phase: "old pod dirs gone", Duration: secs(5.1)}}, Verdict: Pass,
			Metrics: []Metric{{Name: "reconstruct_volume_operations_total", Value: 2, Present: true, Expected: ">= 0", Verdict: Pass}}},
		{Number: 2, From: "v1.28.15", To: "v1.28.15", Direction: "same", FromGates: map[string]bool{gate: false},
			ReconstructionPath: "new", Timings: []Timing{{Phase: "old pod dirs gone", Duration: secs(4.2)}}, Verdict: Pass,
			Metrics: []Metric{{Name: "reconstruct_volume_operations_total", Value: 6, Present: true, Expected: ">= 6", Verdict: Pass}}},
	}
	r.ComputeVerdict()
	return r
}
