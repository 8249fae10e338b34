package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/vm/kopsnode"
	"sigs.k8s.io/skewtest/scenarios/exitcode"
	"sigs.k8s.io/skewtest/scenarios/plan"
)

// kopsNodeCmd runs `skewtest vm kops-node` in a guest: kopsnode.Serve
// until SIGTERM, SIGINT, or the end of its standard input (the SSH
// session that started it closed, or the harness on the other end died).
func kopsNodeCmd(ctx context.Context, logger *slog.Logger, args []string) error {
	fs := flag.NewFlagSet("vm kops-node", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("out", "", "directory for the kubeconfig and node.json (required)")
	server := fs.String("server", "", "the API server's URL as the test reaches it, e.g. https://127.0.0.1:PORT (required)")
	busybox := fs.String("busybox", "/bin/busybox", "a static busybox, the workload image's program")
	port := fs.Int("port", kopsnode.DefaultAPIServerPort, "the guest port the API server is forwarded from (what vm up -forward names)")
	pvs := fs.Int("pvs", 3, "volumes the StorageClass has on each node")
	nodeCount := fs.Int("nodes", 1, "nodes of the cluster, each a kubelet under systemd: the first laid out as kops does, the others beside it (kubelet-2, ...)")
	kubelet := fs.String("kubelet", strings.Split(plan.Default, ",")[0], "the node's own kubelet (and the control plane's version), from the module cache")
	if err := fs.Parse(args); err != nil || *out == "" || *server == "" || *pvs < 1 || *nodeCount < 1 {
		return fmt.Errorf("%w: vm kops-node: -out and -server are required, -pvs and -nodes at least 1 (%v)\n%s", exitcode.ErrInvalid, err, vmUsage)
	}
	v, err := version.ParseSemantic(*kubelet)
	if err != nil {
		return fmt.Errorf("%w: vm kops-node -kubelet %q: %v", exitcode.ErrInvalid, *kubelet, err)
	}
	mb := &binaries.ModuleBuilder{CacheDir: binaries.DefaultCacheDir(), Logger: logger}
	bins, err := mb.Build(ctx, v, "kubelet")
	if err != nil {
		return infrastructure(err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
		cancel(fmt.Errorf("standard input ended"))
	}()
	err = kopsnode.Serve(ctx, kopsnode.Config{
		RunID: fmt.Sprintf("kops-%d", time.Now().Unix()), CacheDir: binaries.DefaultCacheDir(),
		Kubelet: bins["kubelet"], APIServerVersion: *kubelet, Busybox: *busybox, PVs: *pvs, Nodes: *nodeCount,
		Out: *out, Server: *server, APIServerPort: *port, Logger: logger,
	}, func(info kopsnode.Info) {
		b, _ := json.Marshal(info)
		fmt.Printf("%s%s\n", kopsnode.ReadyLine, b)
	})
	return infrastructure(err)
}
