// Package timeouts holds the one factor that stretches skewtest's waits on
// a slow host: the local provider's start timeouts and the scenario's
// waits for pods, node readiness and cleanup both scale by it.
package timeouts

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// FactorEnv names the environment variable that multiplies the waits: an
// integer from 1 (the default) to 100. An emulated guest (qemu TCG, as make
// test-hosts boots on hosts without KVM) runs the same programs 10-45 times
// slower. Only upper bounds grow: a fast host passes as fast as before.
const FactorEnv = "SKEWTEST_TIMEOUT_FACTOR"

// MaxFactor is the largest factor accepted.
const MaxFactor = 100

// Parse reads a FactorEnv value; empty is 1.
func Parse(v string) (time.Duration, error) {
	if v == "" {
		return 1, nil
	}
	f, err := strconv.Atoi(v)
	if err != nil || f < 1 || f > MaxFactor {
		return 0, fmt.Errorf("%s=%q: want an integer from 1 to %d", FactorEnv, v, MaxFactor)
	}
	return time.Duration(f), nil
}

// Scale is d stretched by factor; a factor below 1 (a zero value) leaves d
// as it is.
func Scale(d, factor time.Duration) time.Duration { return d * max(factor, 1) }

// Logs bounds collecting a cluster's logs and API objects before its
// teardown, before Scale.
const Logs = 2 * time.Minute

// Teardown is how long a cluster made on this host gets to tear down,
// before Scale: Finish's bound, and the bound of a provider's teardown
// after its own failed bring-up.
const Teardown = 3 * time.Minute

// FromEnv is the factor of SKEWTEST_TIMEOUT_FACTOR, or 1 when it is unset
// or unusable (the settings' validation reports it, not this).
func FromEnv() time.Duration {
	f, err := Parse(os.Getenv(FactorEnv))
	if err != nil {
		return 1
	}
	return f
}
