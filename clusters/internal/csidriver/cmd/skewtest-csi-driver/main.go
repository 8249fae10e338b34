// Command skewtest-csi-driver runs skewtest's CSI node plugin as a
// process of its own: the container of the DaemonSet that the kind
// provider deploys (the local provider runs the same driver in-process).
// It registers with the kubelet through the plugin registration socket,
// as node-driver-registrar would, and serves until SIGTERM; volumes stay
// mounted when it stops.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"sigs.k8s.io/skewtest/clusters/internal/csidriver"
)

func main() {
	driver := flag.String("driver", "csi.skewtest.k8s.io", "CSI driver name")
	nodeID := flag.String("node-id", os.Getenv("NODE_NAME"), "node name (default $NODE_NAME)")
	root := flag.String("kubelet-root", "/var/lib/kubelet", "the kubelet's --root-dir")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	d, err := csidriver.New(csidriver.Config{DriverName: *driver, NodeID: *nodeID, KubeletRoot: *root, Logger: logger})
	if err == nil {
		err = d.Start(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "skewtest-csi-driver:", err)
		os.Exit(1)
	}
	<-ctx.Done()
	d.Stop()
}
