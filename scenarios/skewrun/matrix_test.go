package skewrun

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/skewtest/scenarios/exitcode"
)

func TestRunMatrixRejectsBadInputBeforeCreatingAnything(t *testing.T) {
	t.Parallel()
	// Kubelets come from an unreachable release mirror, so a regression
	// that lets a case past validation fails fast instead of building.
	for _, tc := range []struct {
		name string
		opts Options
		want []string
	}{
		{"a matrix entry that is not a version", Options{Matrix: "v1.37.2,banana"}, []string{"MATRIX=v1.37.2,banana", `"banana" is not a version`}},
		{"a version given twice", Options{Matrix: "v1.37.2,v1.36.3,v1.37.2"}, []string{"MATRIX=v1.37.2,v1.36.3,v1.37.2", "entry 3 v1.37.2 repeats entry 1", "list each version once"}},
		{"a version outside the skew window of the newest", Options{Matrix: "v1.37.2,v1.33.5"}, []string{"MATRIX=v1.37.2,v1.33.5", "outside the version skew policy", "use v1.34.x or newer"}},
		{"one version", Options{Matrix: "v1.37.2"}, []string{"MATRIX=v1.37.2", "at least two versions"}},
		{"PLAN set", Options{Plan: "v1.37.2,v1.36.3"}, []string{"PLAN=v1.37.2,v1.36.3 is set", "unset PLAN"}},
		{"KUBELETS set", Options{Kubelets: []string{"file:/k"}}, []string{"KUBELETS gives a binary per PLAN entry", "unset KUBELETS"}},
		{"too many nodes", Options{MatrixNodes: 13}, []string{"MATRIX_NODES=13", "want a number from 1 to 12"}},
		{"unknown provider", Options{Provider: "nope"}, []string{"PROVIDER=nope", `unknown provider "nope"`}},
		{"unknown volume kind", Options{VolumeKind: "nfs"}, []string{"VOLUME_KIND", `unknown volume kind "nfs"`}},
		{"more nodes than kind makes", Options{Provider: "kind", MatrixNodes: 5}, []string{"MATRIX_NODES=5 with PROVIDER=kind", "at most 4", "use PROVIDER=local"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dirs := newRunDirs(t)
			o := tc.opts
			o.ArtifactsDir, o.RunRoot, o.CacheDir = dirs.artifacts, dirs.runRoot, dirs.cache
			o.KubeletSource, o.ReleaseBaseURL = "release", "http://127.0.0.1:1"
			o.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
			o.Out = t.Output()
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()

			res, err := RunMatrix(ctx, o)
			if err == nil || res != nil {
				t.Fatalf("RunMatrix = %+v, %v; want no result and an error", res, err)
			}
			if !errors.Is(err, exitcode.ErrInvalid) || exitcode.Of(err) != exitcode.Invalid {
				t.Errorf("error is not bad input (exit %d, want %d): %v", exitcode.Of(err), exitcode.Invalid, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
			dirs.assertNothingCreated(t)
		})
	}
}

func TestValidateMatrix(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		nodes  int
		starts string
	}{{0, "0,2,4,6,8,10"}, {1, "0"}, {3, "0,4,8"}, {4, "0,3,6,9"}, {5, "0,3,6,8,10"}} {
		m, err := validateMatrix(Options{MatrixNodes: tc.nodes, Matrix: "1.36.3,1.34.4,v1.37.2,v1.35.4"})
		if err != nil {
			t.Fatalf("nodes %d: %v", tc.nodes, err)
		}
		var starts []string
		for i, s := range m.Starts {
			starts = append(starts, strconv.Itoa(s))
			if got, want := m.Trails[i].Raw[0], m.Plan.Raw[s]; got != want {
				t.Errorf("nodes %d: trail %d starts at %s, circuit entry %d is %s", tc.nodes, i+1, got, s, want)
			}
		}
		if got := strings.Join(starts, ","); got != tc.starts {
			t.Errorf("nodes %d: trails start at circuit entries %s, want %s", tc.nodes, got, tc.starts)
		}
		if len(m.Plan.Versions) != 13 || m.Plan.Raw[0] != "v1.37.2" || m.Versions.String() != "v1.37.2,v1.36.3,v1.35.4,v1.34.4" {
			t.Errorf("plan %s, versions %s", m.Plan, m.Versions)
		}
	}
}

func TestValidateMatrixDefaultNodesPerProvider(t *testing.T) {
	t.Parallel()
	for provider, want := range map[string]int{"local": 6, "kind": 4, "existing": 6} {
		// An existing cluster's run names the owner's StorageClass.
		env := map[string]string{"PROVIDER": provider, "STORAGE_CLASS": "standard"}
		o, err := OptionsFromEnv(func(k string) string { return env[k] })
		if err != nil {
			t.Fatalf("%s: %v", provider, err)
		}
		m, err := validateMatrix(o)
		if err != nil {
			t.Fatalf("%s: %v", provider, err)
		}
		if len(m.Trails) != want {
			t.Errorf("PROVIDER=%s: %d trails by default, want %d", provider, len(m.Trails), want)
		}
	}
}

func TestOptionsFromEnvMatrix(t *testing.T) {
	t.Parallel()
	o, err := OptionsFromEnv(mapEnv(map[string]string{"MATRIX": "v1.37.2,v1.36.3", "MATRIX_NODES": "2"}))
	if err != nil || o.Matrix != "v1.37.2,v1.36.3" || o.MatrixNodes != 2 {
		t.Errorf("OptionsFromEnv = %q, %d, %v", o.Matrix, o.MatrixNodes, err)
	}
	for _, bad := range []string{"0", "13", "three"} {
		_, err := OptionsFromEnv(mapEnv(map[string]string{"MATRIX_NODES": bad}))
		if !errors.Is(err, exitcode.ErrInvalid) || !strings.Contains(err.Error(), `MATRIX_NODES="`+bad+`": want a number from 1 to 12`) {
			t.Errorf("MATRIX_NODES=%s: %v", bad, err)
		}
	}
}
