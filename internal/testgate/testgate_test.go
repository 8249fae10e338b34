package testgate

import (
	"fmt"
	"testing"
)

// recorder is a TB that records what the gate did.
type recorder struct{ skipped, failed string }

func (r *recorder) Helper()           {}
func (r *recorder) Skip(args ...any)  { r.skipped = fmt.Sprint(args...) }
func (r *recorder) Fatal(args ...any) { r.failed = fmt.Sprint(args...) }

func TestSkipOrFail(t *testing.T) {
	for _, tc := range []struct {
		requireAll, ci string
		wantFail       bool
	}{
		{"", "", false},
		{"1", "", true},
		{"", "true", true},
		{"0", "false", false},
	} {
		t.Setenv(RequireAllEnv, tc.requireAll)
		t.Setenv("CI", tc.ci)
		r := &recorder{}
		SkipOrFail(r, "needs a thing", "install it")
		if tc.wantFail {
			if r.failed == "" || r.skipped != "" {
				t.Errorf("%s=%q CI=%q: skipped %q, failed %q; want a failure", RequireAllEnv, tc.requireAll, tc.ci, r.skipped, r.failed)
			}
		} else if r.skipped == "" || r.failed != "" {
			t.Errorf("%s=%q CI=%q: skipped %q, failed %q; want a skip", RequireAllEnv, tc.requireAll, tc.ci, r.skipped, r.failed)
		}
		if got := r.skipped + r.failed; got == "" || !contains(got, "needs a thing") || !contains(got, "install it") {
			t.Errorf("message %q does not say why and how", got)
		}
	}
}

func TestRequireTools(t *testing.T) {
	t.Setenv(RequireAllEnv, "")
	t.Setenv("CI", "")
	r := &recorder{}
	RequireTools(r, "sh", "skewtest-no-such-tool")
	if !contains(r.skipped, "skewtest-no-such-tool") || contains(r.skipped, "sh,") {
		t.Errorf("RequireTools skipped with %q; want it to name the missing tool only", r.skipped)
	}
	r = &recorder{}
	RequireTools(r, "sh")
	if r.skipped != "" || r.failed != "" {
		t.Errorf("RequireTools with every tool present: skipped %q, failed %q", r.skipped, r.failed)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
