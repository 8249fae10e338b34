package kopsnode

import (
	"context"
	"fmt"
	"os/exec" // ctr in the guest itself, where this program runs
	"path/filepath"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/internal/images"
)

// importBusybox builds the busybox image (Image) into dir and imports it
// into the containerd at socket, pinned, as the local provider imports
// its own images, with the ctr among bins.
func importBusybox(ctx context.Context, bins []binaries.Binary, socket, busybox, dir string) error {
	ctr := ""
	for _, b := range bins {
		if filepath.Base(b.Path) == "ctr" {
			ctr = b.Path
		}
	}
	if ctr == "" {
		return fmt.Errorf("kopsnode: the local provider runs no ctr to import the busybox image with")
	}
	tarball, err := images.BuildBusybox(dir, busybox, Image)
	if err != nil {
		return fmt.Errorf("kopsnode: busybox image: %w", err)
	}
	out, err := exec.CommandContext(ctx, ctr, "--address", socket, "-n", "k8s.io",
		"images", "import", "--label", "io.cri-containerd.pinned=pinned", tarball).CombinedOutput()
	if err != nil {
		return fmt.Errorf("kopsnode: import %s into the node's containerd: %w\n%s", Image, err, out)
	}
	return nil
}
