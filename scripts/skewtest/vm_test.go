package main

import (
	"errors"
	"slices"
	"testing"

	"sigs.k8s.io/skewtest/clusters/vm"
	"sigs.k8s.io/skewtest/scenarios/skewrun"
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
	for _, bad := range [][]string{
		{"down", "-share", "/x"}, // down takes only -name
		{"up", "extra"},
		{"up", "-memory", "lots"},
	} {
		if _, err := parseVMFlags(bad[0], bad[1:]); !errors.Is(err, skewrun.ErrInvalid) {
			t.Errorf("%q: got %v, want bad input (exit 2)", bad, err)
		}
	}
}
