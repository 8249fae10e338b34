package chaos

import "testing"

// The plan meets every phase with every signal in one round of
// len(phases)*len(signals) runs, and 20 runs meet every phase at least 3
// times and every signal at least 3, whatever the seed; the same seed
// gives the same plan.
func TestPlanCoversEveryPhaseAndSignal(t *testing.T) {
	for _, seed := range []uint64{1, 42, 1 << 40} {
		full := plan(seed, len(phases)*len(signals))
		pairs := map[[2]string]bool{}
		for _, in := range full {
			pairs[[2]string{in.phase.name, in.sig.name}] = true
			if in.delay < 0 || in.delay > in.phase.maxDelay {
				t.Errorf("seed %d: %s: delay out of [0, %s]", seed, in, in.phase.maxDelay)
			}
		}
		if len(pairs) != len(phases)*len(signals) {
			t.Errorf("seed %d: %d runs meet %d of the %d pairs", seed, len(full), len(pairs), len(phases)*len(signals))
		}
		byPhase, bySig := map[string]int{}, map[string]int{}
		for _, in := range plan(seed, 20) {
			byPhase[in.phase.name]++
			bySig[in.sig.name]++
		}
		for _, p := range phases {
			if byPhase[p.name] < 3 {
				t.Errorf("seed %d: 20 runs meet %s %d times", seed, p.name, byPhase[p.name])
			}
		}
		for _, s := range signals {
			if bySig[s.name] < 3 {
				t.Errorf("seed %d: 20 runs send %s %d times", seed, s.name, bySig[s.name])
			}
		}
		again := plan(seed, 20)
		for i, in := range plan(seed, 20) {
			if in.String() != again[i].String() {
				t.Errorf("seed %d: run %d differs between two plans: %s, %s", seed, i, in, again[i])
			}
		}
	}
}
