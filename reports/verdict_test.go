package reports

import "testing"

func TestComputeVerdict(t *testing.T) {
	ok := func(name string, hop int) Step { return Step{Name: name, Hop: hop, Verdict: Pass} }
	expectedDev := Deviation{Check: "old mounts gone within 10s", Expected: "<= 10s", Observed: "14s", Reason: "local PV"}
	unexpectedDev := Deviation{Check: "old pod dirs gone", Expected: "none", Observed: "/var/lib/kubelet/pods/u1"}
	for _, tc := range []struct {
		name        string
		run         Run
		want        Verdict
		wantFailure string
		wantHops    []Verdict
	}{
		{
			name:     "all pass",
			run:      Run{Steps: []Step{ok("a", 0), ok("b", 1)}, Hops: []Hop{{Number: 1, Metrics: []Metric{{Name: "m", Verdict: Pass}, {Name: "info"}}}}},
			want:     Pass,
			wantHops: []Verdict{Pass},
		},
		{
			name: "expected deviation in a step",
			run: Run{Steps: []Step{ok("a", 0), {Name: "verify", Hop: 1, Verdict: Pass, Deviations: []Deviation{expectedDev}}},
				Hops: []Hop{{Number: 1}, {Number: 2}}},
			want:     PassWithExpectedDeviations,
			wantHops: []Verdict{PassWithExpectedDeviations, Pass},
		},
		{
			name:     "step verdict pass with expected deviations",
			run:      Run{Steps: []Step{{Name: "verify", Verdict: PassWithExpectedDeviations}}},
			want:     PassWithExpectedDeviations,
			wantHops: []Verdict{},
		},
		{
			name: "metric with expected deviation",
			run: Run{Steps: []Step{ok("a", 1)}, Hops: []Hop{
				{Number: 1, Metrics: []Metric{{Name: "reconstruct_volume_operations_errors_total", Value: 3, Present: true, Verdict: PassWithExpectedDeviations, Reason: "local"}}},
			}},
			want:     PassWithExpectedDeviations,
			wantHops: []Verdict{PassWithExpectedDeviations},
		},
		{
			name:        "failed step, later ones skipped",
			run:         Run{Steps: []Step{ok("a", 1), {Name: "verify cleanup", Hop: 1, Verdict: Fail, Error: "pod u1: /var/lib/kubelet/pods/u1\nstill present"}, {Name: "next", Hop: 2, Verdict: Skipped}}, Hops: []Hop{{Number: 1}, {Number: 2}}},
			want:        Fail,
			wantFailure: "verify cleanup: pod u1: /var/lib/kubelet/pods/u1 still present",
			wantHops:    []Verdict{Fail, Skipped},
		},
		{
			name:        "first failed step wins",
			run:         Run{Steps: []Step{{Name: "one", Verdict: Fail, Error: "e1"}, {Name: "two", Verdict: Fail, Error: "e2"}}},
			want:        Fail,
			wantFailure: "one: e1",
			wantHops:    []Verdict{},
		},
		{
			name:        "failure already set is kept",
			run:         Run{Failure: "setup: cluster unreachable", Steps: []Step{{Name: "one", Verdict: Fail, Error: "e1"}}},
			want:        Fail,
			wantFailure: "setup: cluster unreachable",
			wantHops:    []Verdict{},
		},
		{
			name:        "unexpected deviation on a passing step",
			run:         Run{Steps: []Step{{Name: "verify", Hop: 1, Verdict: Pass, Deviations: []Deviation{expectedDev, unexpectedDev}}}, Hops: []Hop{{Number: 1}}},
			want:        Fail,
			wantFailure: "verify: unexpected deviation: old pod dirs gone: expected none, observed /var/lib/kubelet/pods/u1",
			wantHops:    []Verdict{Fail},
		},
		{
			name: "failed metric",
			run: Run{Steps: []Step{ok("a", 1)}, Hops: []Hop{
				{Number: 1, Metrics: []Metric{{Name: "reconstruct_volume_operations_errors_total", Value: 2, Present: true, Expected: "0", Verdict: Fail, Reason: "CSI volumes reconstruct"}}},
			}},
			want:        Fail,
			wantFailure: "hop 1: metric reconstruct_volume_operations_errors_total = 2, expected 0: CSI volumes reconstruct",
			wantHops:    []Verdict{Fail},
		},
		{
			name:        "hop already failed stays failed",
			run:         Run{Steps: []Step{ok("a", 1)}, Hops: []Hop{{Number: 1, From: "v1.37.2", To: "v1.36.3", Verdict: Fail}}},
			want:        Fail,
			wantFailure: "hop 1 (v1.37.2 → v1.36.3) failed",
			wantHops:    []Verdict{Fail},
		},
		{
			name:     "run already failed stays failed",
			run:      Run{Verdict: Fail, Failure: "aborted", Steps: []Step{ok("a", 0)}},
			want:     Fail,
			wantHops: []Verdict{},
			// Failure kept.
			wantFailure: "aborted",
		},
		{
			name:        "step without a verdict did not finish",
			run:         Run{Steps: []Step{ok("a", 0), {Name: "stop kubelet"}}},
			want:        Fail,
			wantFailure: "stop kubelet: no verdict recorded (the step did not finish)",
			wantHops:    []Verdict{},
		},
		{
			name:     "every step skipped",
			run:      Run{Steps: []Step{{Name: "a", Verdict: Skipped}, {Name: "b", Hop: 1, Verdict: Skipped}}, Hops: []Hop{{Number: 1}}},
			want:     Skipped,
			wantHops: []Verdict{Skipped},
		},
		{
			name:     "empty run",
			run:      Run{},
			want:     Skipped,
			wantHops: []Verdict{},
		},
		{
			name:     "stale pass verdicts are recomputed",
			run:      Run{Verdict: PassWithExpectedDeviations, Steps: []Step{ok("a", 1)}, Hops: []Hop{{Number: 1, Verdict: PassWithExpectedDeviations}}},
			want:     Pass,
			wantHops: []Verdict{Pass},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.run
			r.ComputeVerdict()
			if r.Verdict != tc.want {
				t.Errorf("Verdict = %q, want %q", r.Verdict, tc.want)
			}
			if r.Failure != tc.wantFailure {
				t.Errorf("Failure = %q, want %q", r.Failure, tc.wantFailure)
			}
			if len(r.Hops) != len(tc.wantHops) {
				t.Fatalf("%d hops, want %d", len(r.Hops), len(tc.wantHops))
			}
			for i, h := range r.Hops {
				if h.Verdict != tc.wantHops[i] {
					t.Errorf("hop %d verdict = %q, want %q", h.Number, h.Verdict, tc.wantHops[i])
				}
			}
			// Computing again changes nothing.
			again := r
			again.Hops = append([]Hop(nil), r.Hops...)
			again.ComputeVerdict()
			if again.Verdict != r.Verdict || again.Failure != r.Failure {
				t.Errorf("second ComputeVerdict gave %q/%q, first %q/%q", again.Verdict, again.Failure, r.Verdict, r.Failure)
			}
		})
	}
}
