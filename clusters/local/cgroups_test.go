package local

import (
	"net"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/internal/cgroups"
)

func TestPlanCgroups(t *testing.T) {
	nodesOf := func() []nodeState {
		return []nodeState{layoutOf("/r", 0).state(testRunID), layoutOf("/r", 1).state(testRunID)}
	}
	tests := []struct {
		name      string
		host      cgroups.Host
		want      *runCgroup
		wantRoots []string
	}{
		{"hybrid: a root at the top of every hierarchy, as before", cgroups.Host{Mode: cgroups.Hybrid, Init: cgroups.Init{PID1: "process_api"}},
			nil, []string{"/skewtest-1a2b", "/skewtest-1a2b2"}},
		{"legacy with systemd: the same", cgroups.Host{Mode: cgroups.Legacy, Init: cgroups.Init{Systemd: true}},
			nil, []string{"/skewtest-1a2b", "/skewtest-1a2b2"}},
		{"unified without systemd: the run's cgroup at the top", cgroups.Host{Mode: cgroups.Unified, Init: cgroups.Init{PID1: "tini"}},
			&runCgroup{Path: "/skewtest-1a2b"}, []string{"/skewtest-1a2b/skewtest-worker", "/skewtest-1a2b/skewtest-worker2"}},
		{"unified with systemd: a delegated scope", cgroups.Host{Mode: cgroups.Unified, Init: cgroups.Init{Systemd: true, PID1: "systemd"}},
			&runCgroup{Path: "/system.slice/skewtest-1a2b.scope", Unit: "skewtest-1a2b.scope"},
			[]string{"/system.slice/skewtest-1a2b.scope/skewtest-worker", "/system.slice/skewtest-1a2b.scope/skewtest-worker2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := nodesOf()
			got := planCgroups(tt.host, testRunID, ns)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("planCgroups = %+v, want %+v", got, tt.want)
			}
			var roots []string
			for _, n := range ns {
				roots = append(roots, n.CgroupRoot)
			}
			if !reflect.DeepEqual(roots, tt.wantRoots) {
				t.Errorf("node cgroup roots = %v, want %v", roots, tt.wantRoots)
			}
			if got != nil {
				// The daemons' leaf is beside the nodes' roots, never
				// above one: cgroup v2 lets only leaves hold processes.
				for _, r := range roots {
					if strings.HasPrefix(r+"/", got.daemons()+"/") || strings.HasPrefix(got.daemons()+"/", r+"/") {
						t.Errorf("daemons cgroup %s and node root %s nest", got.daemons(), r)
					}
				}
			}
		})
	}
}

// The kubelet's cgroup driver and containerd's runc's agree, and
// failCgroupV1 follows the host.
func TestCgroupDriverAndFailCgroupV1(t *testing.T) {
	dir := t.TempDir()
	for _, mode := range []cgroups.Mode{cgroups.Unified, cgroups.Hybrid, cgroups.Legacy} {
		p := &Provider{dir: dir, nodeIP: net.IPv4(192, 0, 2, 10), host: cgroups.Host{Mode: mode}}
		n, err := p.newNode(0, layoutOf(dir, 0).state(testRunID), nodePorts{kubelet: 1, kubeletHealthz: 2}, binaries.Binary{})
		if err != nil {
			t.Fatal(err)
		}
		kc, cc := n.kubeletConfig(version.MustParseSemantic("v1.37.2")), n.containerdConfig("/shim")
		wantFail := "failCgroupV1: " + map[bool]string{true: "true", false: "false"}[mode == cgroups.Unified] + "\n"
		if !strings.Contains(kc, wantFail) {
			t.Errorf("%s host: the kubelet config lacks %q:\n%s", mode, wantFail, kc)
		}
		if !strings.Contains(kc, "\ncgroupDriver: cgroupfs\n") || !strings.Contains(cc, "SystemdCgroup = false\n") {
			t.Errorf("%s host: the kubelet (cgroupDriver) and runc (SystemdCgroup) drivers differ or are not cgroupfs:\n%s\n%s", mode, kc, cc)
		}
	}
}

func TestStateKeepsTheRunCgroup(t *testing.T) {
	dir := t.TempDir()
	ns := []nodeState{layoutOf(dir, 0).state(testRunID)}
	want := state{Nodes: ns, Cgroup: planCgroups(cgroups.Host{Mode: cgroups.Unified, Init: cgroups.Init{Systemd: true}}, testRunID, ns)}
	if err := writeState(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := readState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("readState = %+v, want %+v", got, want)
	}
}
