// Package sanity runs the upstream CSI sanity suite
// (github.com/kubernetes-csi/csi-test/v5/pkg/sanity, what the csi-sanity
// command runs) against skewtest's CSI driver, node and controller
// services, in each mode and access type it serves: tmpfs (filesystem),
// ebs (filesystem: loop device, ext4) and ebs (raw block). It makes real
// mounts and loop devices, so it needs root, and says so loudly when it
// skips; CI runs as root.
package sanity

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"sigs.k8s.io/skewtest/clusters/internal/csidriver"
	"sigs.k8s.io/skewtest/clusters/loopdev"
	"sigs.k8s.io/skewtest/clusters/mountinfo"
	"sigs.k8s.io/skewtest/internal/testgate"
)

// notApplicable are the sanity specs skipped, each with why it does not
// apply to this driver. Everything else must pass.
var notApplicable = []struct{ spec, why string }{
	// None so far: every spec either applies and passes, or csi-sanity
	// skips it itself because the driver does not advertise its capability
	// (about 190 of 309 over the three runs: snapshots, cloning, group
	// snapshots, expansion, ListVolumes, GetCapacity, volume stats and
	// health, ControllerModifyVolume, PUBLISH_READONLY, SINGLE_NODE_MULTI_
	// WRITER, attach limits; ControllerPublishVolume and the volume
	// lifecycle specs in the tmpfs mode, which has no attach step). The
	// suite's summary counts them.
}

// volumeSize is what sanity asks CreateVolume for: its 10Gi default would
// make mkfs.ext4 write more metadata than a unit test should.
const volumeSize = 32 << 20

type modeRun struct {
	name   string
	mode   csidriver.Mode
	access string // sanity's TestVolumeAccessType: "mount" or "block"
	cfg    sanity.TestConfig
}

var runs = []*modeRun{
	{name: "tmpfs mode, filesystem volumes", mode: csidriver.ModeTmpfs, access: "mount"},
	{name: "ebs mode, filesystem volumes (loop device, ext4)", mode: csidriver.ModeEBS, access: "mount"},
	{name: "ebs mode, raw block volumes", mode: csidriver.ModeEBS, access: "block"},
}

// The specs are registered at package load, one copy per run; their
// configuration is filled in by TestSanity before they run.
var _ = func() bool {
	for _, r := range runs {
		Describe(r.name, Label(string(r.mode), r.access), func() {
			sanity.GinkgoTest(&r.cfg)
		})
	}
	return true
}()

func TestSanity(t *testing.T) {
	testgate.RequireRoot(t, "csi-sanity makes real mounts and loop devices; sudo -E go test ./clusters/internal/csidriver/sanity/ runs it alone")
	for _, p := range []string{"losetup", "blkid", "mkfs.ext4"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("csi-sanity of the ebs mode needs %s (util-linux, e2fsprogs; scripts/install-deps.sh installs them): %v", p, err)
		}
	}
	// In the test's own temporary directory: the host footprint that other
	// packages' tests compare meanwhile leaves out what is mounted and
	// attached there.
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := mountinfo.UnmountUnder(base); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if err := loopdev.DetachUnder(context.Background(), base, 10*time.Second); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if err := os.RemoveAll(base); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	for i, r := range runs {
		dir := filepath.Join(base, fmt.Sprint(i))
		d, err := csidriver.New(csidriver.Config{
			DriverName: csidriver.Name, Mode: r.mode, NodeID: "sanity-node",
			KubeletRoot: filepath.Join(dir, "kubelet"), ControllerEndpoint: filepath.Join(dir, "controller.sock"),
			StateDir: filepath.Join(dir, "state"), Nodes: []string{"sanity-node"},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = d.Start(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.Stop)
		cfg := sanity.NewTestConfig()
		cfg.Address = "unix://" + d.CSIEndpoint()
		cfg.ControllerAddress = "unix://" + d.ControllerEndpoint()
		cfg.TargetPath = filepath.Join(dir, "target")
		cfg.StagingPath = filepath.Join(dir, "staging")
		cfg.TestVolumeSize = volumeSize
		cfg.TestVolumeAccessType = r.access
		cfg.IdempotentCount = 3
		r.cfg = cfg
	}

	RegisterFailHandler(Fail)
	suiteCfg, reporterCfg := GinkgoConfiguration()
	for _, s := range notApplicable {
		suiteCfg.SkipStrings = append(suiteCfg.SkipStrings, s.spec)
	}
	reporterCfg.Succinct = !testing.Verbose()
	if !RunSpecs(t, "csi-sanity: skewtest's CSI driver", suiteCfg, reporterCfg) {
		t.Logf("csi-sanity failed; specs skipped as not applicable: %s", skipped())
	}
}

func skipped() string {
	var out []string
	for _, s := range notApplicable {
		out = append(out, s.spec+" ("+s.why+")")
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}
