// Command skewtest-csi-driver runs skewtest's CSI driver as a process of
// its own: its node service (the local provider starts one per node; the
// kind provider runs it as a DaemonSet's container) and, with
// --controller-endpoint, its controller service (one per cluster). The
// node service registers with the kubelet through the plugin registration
// socket, as node-driver-registrar would. It serves until SIGTERM; volumes
// stay mounted and attached when it stops.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"sigs.k8s.io/skewtest/clusters/internal/csidriver"
)

func main() {
	driver := flag.String("driver", csidriver.Name, "CSI driver name")
	mode := flag.String("mode", string(csidriver.ModeTmpfs), "how volumes are backed: tmpfs or ebs")
	nodeService := flag.Bool("node-service", true, "serve the node service (and register with the kubelet)")
	nodeID := flag.String("node-id", os.Getenv("NODE_NAME"), "node name (default $NODE_NAME)")
	root := flag.String("kubelet-root", "/var/lib/kubelet", "the kubelet's --root-dir")
	controller := flag.String("controller-endpoint", "", "unix socket to serve the controller service on; empty: no controller service")
	stateDir := flag.String("state-dir", "", "the controller's state: volumes' backing files and attachment records")
	nodes := flag.String("nodes", "", "comma-separated node IDs the controller may attach to (empty: any)")
	stallDir := flag.String("stall-dir", "", "the knob directory: while <stall-dir>/<CSI method> exists, calls of that method wait; while <stall-dir>/<CSI method>.fail/<volume ID> exists, calls of that method for that volume fail with the gRPC code it names (\"FailedPrecondition 2\": twice; \"Unavailable always\": until it is removed)")
	callsFile := flag.String("calls-file", "", "append one JSON line per CSI call served to this file")
	flag.Parse()

	m, err := csidriver.ParseMode(*mode)
	if err != nil {
		fmt.Fprintln(os.Stderr, "skewtest-csi-driver: --mode:", err)
		os.Exit(2)
	}
	cfg := csidriver.Config{DriverName: *driver, Mode: m, NodeID: *nodeID, ControllerEndpoint: *controller, StateDir: *stateDir,
		StallDir: *stallDir, CallsFile: *callsFile, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	if *nodeService {
		cfg.KubeletRoot = *root
	}
	if *nodes != "" {
		cfg.Nodes = strings.Split(*nodes, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	d, err := csidriver.New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "skewtest-csi-driver:", err)
		os.Exit(2)
	}
	if err := d.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "skewtest-csi-driver:", err)
		os.Exit(1)
	}
	<-ctx.Done()
	d.Stop()
}
