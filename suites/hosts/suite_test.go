// Package hosts is the Ginkgo suite behind `make test-hosts`: skewtest's
// local provider on the host shape most users have, cgroup v2 (unified)
// with systemd as PID 1, proven inside a real Debian 12 guest under qemu
// (clusters/vm). The kubelets and the control plane are resolved on the
// host and shared into the guest over 9p from the cache; the skewtest
// binary is built on the host; the guest's reports land in
// $ARTIFACTS/hosts/.
//
// Needs root, qemu-system-x86, qemu-utils and debootstrap (the guest image
// is built on first use), and a warm binary cache (built on the host if
// not). Under TCG (no usable KVM) it takes tens of minutes.
package hosts

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"sigs.k8s.io/skewtest/internal/suiteconfig"
)

func TestHosts(t *testing.T) {
	RegisterFailHandler(Fail)
	suiteConfig, reporterConfig := GinkgoConfiguration()
	reporterConfig.Verbose = true
	// A spec's teardown outlives an interrupt and the suite's deadline.
	suiteconfig.Apply(t, &suiteConfig)
	RunSpecs(t, "skewtest: the local provider on a cgroup v2 systemd host (qemu guest)", suiteConfig, reporterConfig)
}
