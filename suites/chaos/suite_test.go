// Package chaos is the suite behind `make test-chaos`: skewtest runs
// interrupted at chosen points of their life by SIGINT, SIGTERM, SIGHUP,
// or SIGKILL followed by `skewtest clean`, each checked to leave the host
// as it found it (clusters/footprint). Which signal meets which phase, and
// after what delay, comes from a seed the suite prints (CHAOS_SEED).
package chaos

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"sigs.k8s.io/skewtest/internal/suiteconfig"
)

func TestChaos(t *testing.T) {
	RegisterFailHandler(Fail)
	suiteConfig, reporterConfig := GinkgoConfiguration()
	reporterConfig.Verbose = true
	suiteconfig.Apply(t, &suiteConfig)
	RunSpecs(t, "skewtest: interrupted runs leave nothing behind", suiteConfig, reporterConfig)
}
