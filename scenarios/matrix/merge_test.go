package matrix

import (
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/skewtest/reports"
)

func TestMerge(t *testing.T) {
	vs := versions(t, "v1.37.2,v1.36.3")
	trails := Split(Circuit(vs), 2) // v1.37.2 → v1.36.3, v1.36.3 → v1.37.2
	a := TrailRun{Node: "w1", Plan: trails[0], ArtifactsSubdir: "trails/1-w1", Run: &reports.Run{
		Steps: []reports.Step{
			{Index: 1, Name: "deploy", Verdict: reports.Pass, Evidence: []reports.Evidence{{Name: "snap", Path: "steps/01-deploy/m.txt"}, {Name: "abs", Path: "/tmp/x"}}},
			{Index: 2, Hop: 1, Name: "hop 1: stop kubelet", Verdict: reports.Pass},
		},
		Hops:    []reports.Hop{{Number: 1, From: "v1.37.2", To: "v1.36.3", Timings: []reports.Timing{{Phase: "old pod dirs gone", Duration: 4 * time.Second}}}},
		Timings: []reports.Timing{{Phase: "workload Running", Duration: time.Second}},
	}}
	// The second trail recorded its hop as number 2 (its first hop's
	// number in the tour); it ran nothing else and left nothing unreached.
	b := TrailRun{Node: "w2", Plan: trails[1], ArtifactsSubdir: "trails/2-w2", Run: &reports.Run{
		Steps: []reports.Step{{Index: 1, Hop: 2, Name: "hop 2: stop kubelet", Verdict: reports.Pass}},
		Hops:  []reports.Hop{{Number: 2, From: "v1.36.3", To: "v1.37.2"}},
	}}
	r := Merge(reports.Run{ID: "x", Timings: []reports.Timing{{Phase: "cluster up", Duration: time.Second}}}, []TrailRun{a, b})
	if r.Verdict != reports.Pass || r.Node != "w1, w2" || len(r.Trails) != 2 || r.Trails[1].Node != "w2" || strings.Join(r.Trails[1].Plan, ",") != "v1.36.3,v1.37.2" {
		t.Fatalf("merged run: verdict %s (%s), node %q, trails %+v", r.Verdict, r.Failure, r.Node, r.Trails)
	}
	if len(r.Hops) != 2 || r.Hops[0].Node != "w1" || r.Hops[1].Node != "w2" || r.Hops[1].Number != 2 {
		t.Errorf("hops %+v", r.Hops)
	}
	want := []struct {
		index, hop int
		name       string
	}{{1, 0, "w1: deploy"}, {2, 1, "w1: hop 1: stop kubelet"}, {3, 2, "w2: hop 2: stop kubelet"}}
	for i, w := range want {
		s := r.Steps[i]
		if s.Index != w.index || s.Hop != w.hop || s.Name != w.name {
			t.Errorf("step %d = %d hop %d %q, want %d hop %d %q", i, s.Index, s.Hop, s.Name, w.index, w.hop, w.name)
		}
	}
	if p := r.Steps[0].Evidence[0].Path; p != "trails/1-w1/steps/01-deploy/m.txt" {
		t.Errorf("evidence path %q, want it under the trail's directory", p)
	}
	if p := r.Steps[0].Evidence[1].Path; p != "/tmp/x" {
		t.Errorf("absolute evidence path became %q", p)
	}
	if a.Run.Steps[0].Evidence[0].Path != "steps/01-deploy/m.txt" || a.Run.Steps[0].Name != "deploy" {
		t.Errorf("Merge changed the trail's own record: %+v", a.Run.Steps[0])
	}
	var phases []string
	for _, tm := range r.Timings {
		phases = append(phases, tm.Phase)
	}
	if got := strings.Join(phases, ","); got != "cluster up,w1: workload Running" {
		t.Errorf("timings %s", got)
	}
}

func TestMergeRenumbersHops(t *testing.T) {
	// Trails numbered from 1 each, as a runner without FirstHop would:
	// the merge numbers them in trail order all the same.
	mk := func(node string) TrailRun {
		return TrailRun{Node: node, Run: &reports.Run{
			Steps: []reports.Step{{Hop: 1, Name: "hop 1", Verdict: reports.Pass}, {Hop: 2, Name: "hop 2", Verdict: reports.Fail, Error: "boom"}},
			Hops:  []reports.Hop{{Number: 1, From: "v1.37.2", To: "v1.36.3"}, {Number: 2, From: "v1.36.3", To: "v1.37.2"}},
		}}
	}
	r := Merge(reports.Run{}, []TrailRun{mk("a"), mk("b")})
	var got []int
	for _, s := range r.Steps {
		got = append(got, s.Hop)
	}
	if len(got) != 4 || got[0] != 1 || got[1] != 2 || got[2] != 3 || got[3] != 4 {
		t.Errorf("step hops %v, want [1 2 3 4]", got)
	}
	if r.Hops[3].Number != 4 || r.Hops[3].Verdict != reports.Fail || r.Hops[2].Verdict != reports.Pass || r.Verdict != reports.Fail {
		t.Errorf("hops %+v, verdict %s", r.Hops, r.Verdict)
	}
	if r.Trails[0].Verdict != reports.Fail {
		t.Errorf("trail a verdict %s, want fail", r.Trails[0].Verdict)
	}
}

func TestMergeUnreachedFails(t *testing.T) {
	tr := TrailRun{Node: "w1", Run: &reports.Run{
		Steps: []reports.Step{{Hop: 1, Name: "hop 1", Verdict: reports.Pass}},
		Hops:  []reports.Hop{{Number: 1, From: "v1.37.2", To: "v1.36.3"}},
	}, Unreached: []reports.UnreachedHop{{Node: "w1", From: "v1.36.3", To: "v1.37.2", Reason: "the run was interrupted"}}}
	r := Merge(reports.Run{}, []TrailRun{tr})
	if r.Verdict != reports.Fail || !strings.Contains(r.Failure, "1 of the tour's pairs were not reached, the first v1.36.3 → v1.37.2 on w1: the run was interrupted") {
		t.Errorf("verdict %s (%s), want a failure naming the unreached pair", r.Verdict, r.Failure)
	}
	if r.Trails[0].Verdict != reports.Fail || len(r.Unreached) != 1 {
		t.Errorf("trail verdict %s, unreached %v", r.Trails[0].Verdict, r.Unreached)
	}
	if !strings.HasPrefix(r.Steps[0].Name, "hop 1") {
		t.Errorf("a single trail's steps are not prefixed: %q", r.Steps[0].Name)
	}
}
