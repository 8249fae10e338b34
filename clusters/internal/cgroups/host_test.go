package cgroups

import (
	"os"
	"path/filepath"
	"testing"
)

func TestModeFromFSTypes(t *testing.T) {
	tests := []struct {
		top, unified string
		want         Mode
		wantErr      bool
	}{
		{"cgroup2fs", "-", Unified, false},
		{"tmpfs", "cgroup2fs", Hybrid, false},
		{"tmpfs", "-", Legacy, false},
		{"tmpfs", "", Legacy, false},
		{"cgroupfs", "", Legacy, false},
		{"ext2/ext3", "-", "", true},
	}
	for _, tt := range tests {
		got, err := ModeFromFSTypes(tt.top, tt.unified)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ModeFromFSTypes(%q, %q) = %q, %v; want %q, error %v", tt.top, tt.unified, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestModeString(t *testing.T) {
	for m, want := range map[Mode]string{Unified: "v2 (unified)", Hybrid: "v1 (hybrid: cgroup2 at /sys/fs/cgroup/unified)", Legacy: "v1 (legacy)", "": "unknown"} {
		if got := m.String(); got != want {
			t.Errorf("Mode(%q).String() = %q, want %q", string(m), got, want)
		}
	}
}

func TestDetectInit(t *testing.T) {
	fake := func(t *testing.T, systemdDir bool, comm string) string {
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, "proc", "1"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "proc", "1", "comm"), []byte(comm+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if systemdDir {
			if err := os.MkdirAll(filepath.Join(root, "run", "systemd", "system"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return root
	}
	tests := []struct {
		name       string
		systemdDir bool
		comm       string
		want       Init
		str        string
	}{
		{"booted with systemd", true, "systemd", Init{Systemd: true, PID1: "systemd"}, "systemd"},
		{"systemd renamed by a wrapper", true, "init", Init{Systemd: true, PID1: "init"}, "systemd"},
		{"systemd without /run/systemd/system", false, "systemd", Init{Systemd: true, PID1: "systemd"}, "systemd"},
		// /run/systemd without system/ is left by systemd-tmpfiles or a
		// systemd package on a host it did not boot, as on our VMs.
		{"our VMs", false, "process_api", Init{PID1: "process_api"}, "not systemd (PID 1: process_api)"},
		{"a container's tini", false, "tini", Init{PID1: "tini"}, "not systemd (PID 1: tini)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := detectInit(fake(t, tt.systemdDir, tt.comm))
			if got != tt.want || got.String() != tt.str {
				t.Errorf("detectInit = %+v (%q), want %+v (%q)", got, got.String(), tt.want, tt.str)
			}
		})
	}
	if got := detectInit(t.TempDir()); got.Systemd || got.String() != "unknown" {
		t.Errorf("detectInit of an empty root = %+v (%q), want not systemd, unknown", got, got.String())
	}
}

func TestParseProbe(t *testing.T) {
	tests := []struct {
		out     string
		want    Host
		wantErr bool
	}{
		{"cgroup2fs\n-\nsystemd-booted\nsystemd\n", Host{Unified, Init{Systemd: true, PID1: "systemd"}}, false},
		{"tmpfs\ncgroup2fs\n-\nprocess_api\n", Host{Hybrid, Init{PID1: "process_api"}}, false},
		{"tmpfs\n-\n-\ninit\n", Host{Legacy, Init{PID1: "init"}}, false},
		{"cgroup2fs\n", Host{}, true},
		{"nfs\n-\n-\ninit\n", Host{}, true},
	}
	for _, tt := range tests {
		got, err := ParseProbe(tt.out)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ParseProbe(%q) = %+v, %v; want %+v, error %v", tt.out, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestProbeCommandOnThisHost runs the probe a remote node runs and checks
// it says what Detect says here.
func TestProbeCommandOnThisHost(t *testing.T) {
	want, err := Detect()
	if err != nil {
		t.Fatalf("Detect: %v", err)
	}
	out, err := execSh(ProbeCommand)
	if err != nil {
		t.Fatalf("sh -c ProbeCommand: %v: %s", err, out)
	}
	got, err := ParseProbe(out)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("the probe says %+v, Detect says %+v", got, want)
	}
}
