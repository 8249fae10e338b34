package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/clusters/footprint"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
)

func TestFootprintCmd(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "fp.json")
	var out strings.Builder
	if err := footprintCmd(ctx, streams{out: &out}, []string{"save", file}); err != nil {
		t.Fatalf("save: %v", err)
	}
	if !strings.Contains(out.String(), "saved to "+file) {
		t.Errorf("save printed %q", out.String())
	}
	// A leak planted in the saved file's future: take the saved footprint
	// back by a link it never had, as if a run had left it.
	f, err := footprint.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	f.Links = append(f.Links, "skwgone")
	f.Sysctls = append(f.Sysctls, "kernel.panic=12345")
	if err := footprint.Save(file, f); err != nil {
		t.Fatal(err)
	}
	err = footprintCmd(ctx, streams{out: &out}, []string{"compare", file})
	if err == nil || !errors.Is(err, exitcode.ErrInfrastructure) {
		t.Fatalf("compare with a difference = %v; want an infrastructure error", err)
	}
	for _, want := range []string{"removed link skwgone", "changed sysctl kernel.panic: 12345 -> "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("compare does not name %q:\n%v", want, err)
		}
	}
	for _, args := range [][]string{{"save"}, {"diff", file}, {"compare", filepath.Join(t.TempDir(), "missing.json")}} {
		if err := footprintCmd(ctx, streams{out: &out}, args); !errors.Is(err, exitcode.ErrInvalid) {
			t.Errorf("footprint %q = %v; want bad input", args, err)
		}
	}
	if err := os.WriteFile(file, []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := footprintCmd(ctx, streams{out: &out}, []string{"compare", file}); !errors.Is(err, exitcode.ErrInvalid) {
		t.Errorf("compare with a broken file = %v; want bad input", err)
	}
}
