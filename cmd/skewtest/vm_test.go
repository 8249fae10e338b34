package main

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/clusters/vm"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
)

func TestParseVMFlags(t *testing.T) {
	f, err := parseVMFlags("exec", []string{"-name", "t1", "-share", "/src:ro", "-share", "/out", "-go", "-accel", "tcg", "--", "sh", "-c", "echo -go"})
	if err != nil {
		t.Fatal(err)
	}
	if f.name != "t1" || !f.goTools || f.accel != "tcg" || !f.changed {
		t.Errorf("flags: %+v", f)
	}
	want := []vm.Share{{HostPath: "/src", ReadOnly: true}, {HostPath: "/out"}}
	if !slices.Equal(f.shares, want) {
		t.Errorf("shares %+v, want %+v", f.shares, want)
	}
	// Everything after -- is the guest command, flags included.
	if !slices.Equal(f.argv, []string{"sh", "-c", "echo -go"}) {
		t.Errorf("argv %q", f.argv)
	}
	f, err = parseVMFlags("exec", []string{"-name", "t1", "--", "true"})
	if err != nil || f.changed {
		t.Errorf("-name alone marks the flags changed: %+v %v", f, err)
	}
	f, err = parseVMFlags("up", []string{"-env", "A=b=c", "-env", "EMPTY="})
	if err != nil || !slices.Equal(f.env, []string{"A=b=c", "EMPTY="}) {
		t.Errorf("-env: %q %v", f.env, err)
	}
	for _, bad := range [][]string{
		{"down", "-share", "/x"}, // down takes only -name
		{"show", "-go"},          // so does show
		{"up", "-env", "NOEQUALS"},
		{"up", "-env", "=v"},
		{"up", "extra"},
		{"up", "-memory", "lots"},
	} {
		if _, err := parseVMFlags(bad[0], bad[1:]); !errors.Is(err, exitcode.ErrInvalid) {
			t.Errorf("%q: got %v, want bad input (exit 2)", bad, err)
		}
	}
}

func TestShowVMPrintsTheInstanceAndWhetherItRuns(t *testing.T) {
	var b strings.Builder
	inst := &vm.Instance{Name: "t1", SSHAddress: "127.0.0.1:2222", Forwards: map[int]string{6443: "127.0.0.1:40001"}, Accel: vm.AccelTCG, PID: -1}
	if err := showVM(&b, inst); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Name       string         `json:"name"`
		SSHAddress string         `json:"sshAddress"`
		Forwards   map[int]string `json:"forwards"`
		Accel      string         `json:"accel"`
		Running    *bool          `json:"running"`
	}
	if err := json.Unmarshal([]byte(b.String()), &got); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if got.Name != "t1" || got.SSHAddress != inst.SSHAddress || got.Forwards[6443] != "127.0.0.1:40001" || got.Accel != "tcg" {
		t.Errorf("vm show printed %+v", got)
	}
	if got.Running == nil || *got.Running {
		t.Errorf("running = %v for an instance whose qemu is not this host's", got.Running)
	}
}
