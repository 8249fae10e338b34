package nodeimage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec" // containerd on this host, a daemon importing the node image's images
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/internal/debian"
	"sigs.k8s.io/skewtest/internal/lines"
)

// storeContainerd is a throwaway containerd whose content store is a node
// rootfs's /var/lib/containerd: the CRI plugins are disabled and its socket,
// state and opt dirs are its own, so it never meets a containerd the host
// runs. `kind build node-image` does the same inside its build container.
type storeContainerd struct {
	dir    string // socket, state, config, log
	socket string
	ctr    string
	cmd    *exec.Cmd
	done   chan error
}

// Plugins the throwaway containerd does not load: it only stores images.
var storeDisabledPlugins = []string{
	"io.containerd.grpc.v1.cri",
	"io.containerd.cri.v1.images",
	"io.containerd.cri.v1.runtime",
	"io.containerd.podsandbox.controller.v1.podsandbox",
	"io.containerd.nri.v1.nri",
	"io.containerd.monitor.container.v1.restart",
}

func storeContainerdConfig(root, state, socket, opt string) string {
	quoted := make([]string, len(storeDisabledPlugins))
	for i, p := range storeDisabledPlugins {
		quoted[i] = fmt.Sprintf("%q", p)
	}
	return fmt.Sprintf(`version = 3
root = %q
state = %q
disabled_plugins = [%s]

[grpc]
  address = %q

[ttrpc]
  address = %q

[debug]
  address = ""

[metrics]
  address = ""

[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = %q
`, root, state, strings.Join(quoted, ", "), socket, socket+".ttrpc", opt)
}

// startStoreContainerd starts containerd with its root at root (made if
// missing) and waits until it answers.
func startStoreContainerd(ctx context.Context, bins map[string]binaries.Binary, root string) (*storeContainerd, error) {
	if err := os.MkdirAll(root, 0o711); err != nil {
		return nil, err
	}
	// A short directory: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "skewtest-ctrd-")
	if err != nil {
		return nil, err
	}
	c := &storeContainerd{dir: dir, socket: filepath.Join(dir, "c.sock"), ctr: bins["ctr"].Path, done: make(chan error, 1)}
	cfg := storeContainerdConfig(root, filepath.Join(dir, "state"), c.socket, filepath.Join(dir, "opt"))
	cfgPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c.cmd = exec.Command(bins["containerd"].Path, "--config", cfgPath, "--log-level", "warn")
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	// Dies with us, whatever happens to this process.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		logf.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	go func() {
		c.done <- c.cmd.Wait()
		logf.Close()
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "unix", c.socket)
		if err == nil {
			conn.Close()
			break
		}
		select {
		case werr := <-c.done:
			c.done <- werr
			log, _ := os.ReadFile(filepath.Join(dir, "containerd.log"))
			c.Stop()
			return nil, fmt.Errorf("throwaway containerd exited: %v\n%s", werr, lines.Last(string(log), 20))
		case <-ctx.Done():
			c.Stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "containerd.log"))
			c.Stop()
			return nil, fmt.Errorf("throwaway containerd did not listen on %s within 30 s\n%s", c.socket, lines.Last(string(log), 20))
		}
	}
	return c, nil
}

// Ctr runs ctr against this containerd in namespace k8s.io.
func (c *storeContainerd) Ctr(ctx context.Context, args ...string) (string, error) {
	full := append([]string{"--address", c.socket, "--namespace", "k8s.io"}, args...)
	cmd := exec.CommandContext(ctx, c.ctr, full...)
	// stdout only: ctr warns on stderr (e.g. about cgroup v1 hosts).
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out), nil
}

// Images lists the image names in namespace k8s.io.
func (c *storeContainerd) Images(ctx context.Context) ([]string, error) {
	out, err := c.Ctr(ctx, "images", "ls", "-q")
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

// Stop ends containerd (SIGTERM, then SIGKILL after 10 s), waits for it and
// removes its directory. Safe to call twice.
func (c *storeContainerd) Stop() error {
	if c.cmd == nil || c.cmd.Process == nil {
		return nil
	}
	var err error
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case werr := <-c.done:
		c.done <- werr
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		werr := <-c.done
		c.done <- werr
		err = errors.New("throwaway containerd did not stop on SIGTERM; killed")
	}
	debian.UnmountUnder(c.dir)
	os.RemoveAll(c.dir)
	c.cmd = nil
	return err
}

// importImages imports the image tarball into rootfs's containerd store
// the way `kind build node-image` does (pinned, all platforms, not
// unpacked: the node's containerd unpacks on first use) and checks that
// every name in want is there. It returns the names in the store.
func importImages(ctx context.Context, log *slog.Logger, rootfs string, ctrd map[string]binaries.Binary, tarball string, want []string) ([]string, error) {
	root, err := resolveIn(rootfs, "/var/lib/containerd", true)
	if err != nil {
		return nil, err
	}
	c, err := startStoreContainerd(ctx, ctrd, root)
	if err != nil {
		return nil, err
	}
	defer c.Stop()
	if _, err := c.Ctr(ctx, "images", "import", "--label=io.cri-containerd.pinned=pinned", "--all-platforms", "--no-unpack", "--digests", tarball); err != nil {
		return nil, err
	}
	have, err := c.Images(ctx)
	if err != nil {
		return nil, err
	}
	if missing := missingImages(have, want); len(missing) > 0 {
		return nil, fmt.Errorf("images missing from the node's containerd store after import: %v (have %v)", missing, have)
	}
	if err := c.Stop(); err != nil {
		log.Warn(err.Error())
	}
	var named []string
	for _, h := range have {
		// --digests adds import-<date>@sha256:... names; keep the tags.
		if !strings.Contains(h, "@sha256:") {
			named = append(named, h)
		}
	}
	return named, nil
}

// The node's containerd content store (the images' blobs) lives outside
// /var, where a symlink from its usual place leads. kind mounts a fresh
// volume at /var on every node, so that containerd's snapshots are not on
// overlayfs, and Docker copies the image's /var into it when the node
// starts and deletes it with the node: the blobs, 170 MB of the
// control-plane images, were copied and deleted on every node of every
// bring-up. They are only read, and the runs' own few images added, both
// of which work on the image's layer, which every node shares.
const (
	contentInVar = "/var/lib/containerd/io.containerd.content.v1.content"
	contentHome  = "/kind/containerd-content"
)

// moveContentOutOfVar moves rootfs's containerd content store from
// contentInVar to contentHome and leaves a symlink in its place, relative
// so that it leads there in the rootfs unpacked anywhere, as in the node.
func moveContentOutOfVar(rootfs string) error {
	from := filepath.Join(rootfs, contentInVar)
	to := filepath.Join(rootfs, contentHome)
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	if err := os.Rename(from, to); err != nil {
		return fmt.Errorf("move the containerd content store out of /var: %w", err)
	}
	rel, err := filepath.Rel(filepath.Dir(contentInVar), contentHome)
	if err != nil {
		return err
	}
	return os.Symlink(rel, from)
}

// missingImages returns the names of want that are not in have.
func missingImages(have, want []string) []string {
	set := map[string]bool{}
	for _, h := range have {
		set[h] = true
	}
	var missing []string
	for _, w := range want {
		if !set[w] {
			missing = append(missing, w)
		}
	}
	return missing
}
