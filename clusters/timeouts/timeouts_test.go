package timeouts

import (
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for v, want := range map[string]time.Duration{"": 1, "1": 1, "10": 10, "100": 100, "0": 0, "-3": 0, "101": 0, "x": 0, "1.5": 0} {
		got, err := Parse(v)
		if want == 0 {
			if err == nil || !strings.Contains(err.Error(), FactorEnv) {
				t.Errorf("%s=%q: got %d, %v; want an error naming the variable", FactorEnv, v, got, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%s=%q: got %d, %v; want %d", FactorEnv, v, got, err, want)
		}
		if Scale(time.Minute, got) != want*time.Minute {
			t.Errorf("%s=%q: Scale(1m) = %s", FactorEnv, v, Scale(time.Minute, got))
		}
	}
	if Scale(time.Second, 0) != time.Second {
		t.Errorf("a zero factor does not keep timeouts as they are")
	}
}
