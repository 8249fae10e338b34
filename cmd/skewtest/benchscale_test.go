package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/scenarios/exitcode"
)

// Bad input exits 2 before any run, naming the input and the fix.
func TestBenchScaleBadInput(t *testing.T) {
	t.Setenv("ARTIFACTS", t.TempDir())
	for _, tc := range []struct {
		env, value string
		args       []string
		want       string
	}{
		{"", "", []string{"-pods", "200"}, "-pods 200"},
		{"", "", []string{"extra"}, "unexpected argument"},
		{"", "", []string{"-rounds", "3"}, "flag provided but not defined"},
		{"SCENARIO", "reboot", nil, "unset SCENARIO"},
		{"PLAN", "v1.37.2,v1.20.0", nil, "PLAN=v1.37.2,v1.20.0"},
	} {
		if tc.env != "" {
			t.Setenv(tc.env, tc.value)
		}
		err := benchScaleCmd(context.Background(), streams{logger: slog.New(slog.DiscardHandler), out: io.Discard, errOut: io.Discard}, tc.args)
		if exitcode.Of(err) != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%s bench-scale %v: exit %d (%v), want 2 naming %q", tc.env, tc.value, tc.args, exitcode.Of(err), err, tc.want)
		}
		if tc.env != "" {
			os.Unsetenv(tc.env)
		}
	}
}
