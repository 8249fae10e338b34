// Package vmnode is what the node-side tests in a qemu guest share (build
// tag vmnode: clusters/existing and clusters/kops): how to reach the guest
// `skewtest vm up` started, the script that lays it out as kops lays out a
// node, and reading which kubelet the unit really runs.
package vmnode

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/internal/systemdkubelet"
)

// The guest: SSHEnv is its host:port, KeyEnv and KnownHostsEnv what
// `skewtest vm up` prints; it logs in as root. The kubelets come from
// $SKEWTEST_CACHE/module, which the guest shares read-only at the same
// path.
const (
	SSHEnv        = "SKEWTEST_VM_SSH"
	KeyEnv        = "SKEWTEST_VM_KEY"
	KnownHostsEnv = "SKEWTEST_VM_KNOWN_HOSTS"
)

// Addr is the guest's SSH address; the test fails, saying how to start a
// guest, when it is unset.
func Addr(t *testing.T) string {
	t.Helper()
	addr := os.Getenv(SSHEnv)
	if addr == "" {
		t.Fatalf("%s is not set: this test (build tag vmnode) needs a running guest: skewtest vm up, then its SSH address, key and known_hosts in %s, %s, %s", SSHEnv, SSHEnv, KeyEnv, KnownHostsEnv)
	}
	return addr
}

// KopsNodeSetup lays the guest out as kops lays out a node
// (nodeup/pkg/model/kubelet.go): containerd as a unit, the kubelet at
// /usr/local/bin/kubelet as kubelet.service with its flags in
// /etc/sysconfig/kubelet (EnvironmentFile), its config in
// /var/lib/kubelet/kubelet.conf, Restart=always, KillMode=process. The
// kubelet runs standalone: there is no API server in the guest. It also
// installs, not enabled, a kops-configuration.service standing in for
// nodeup's boot-time run: it puts kops's kubelet (kept in
// /opt/kops-nodeup/kubelet) back and restarts the unit, as nodeup does
// after a reboot.
const KopsNodeSetup = `set -eu
C=${SKEWTEST_CACHE:-/root/.cache/skewtest}
# Idempotent: an earlier round's kubelet must not keep running a binary
# replaced under it.
systemctl stop kubelet.service 2>/dev/null || true
rm -f /usr/local/bin/kubelet.skewtest-orig /usr/local/bin/kubelet.skewtest-new
install -m 0755 "$C/module/v1.37.2/bin/kubelet" /usr/local/bin/kubelet
mkdir -p /opt/kops-nodeup
install -m 0755 "$C/module/v1.37.2/bin/kubelet" /opt/kops-nodeup/kubelet
install -m 0755 "$C/tools/github.com_containerd_containerd_v2@v2.4.2/bin/containerd" /usr/local/bin/containerd
cat > /etc/systemd/system/containerd.service <<'UNIT'
[Service]
ExecStart=/usr/local/bin/containerd
Restart=always
Delegate=yes
KillMode=process
[Install]
WantedBy=multi-user.target
UNIT
mkdir -p /etc/sysconfig /var/lib/kubelet
cat > /var/lib/kubelet/kubelet.conf <<'CONF'
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
failSwapOn: false
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
healthzBindAddress: 127.0.0.1
healthzPort: 10248
CONF
echo 'DAEMON_ARGS="--config=/var/lib/kubelet/kubelet.conf --v=2"' > /etc/sysconfig/kubelet
cat > /lib/systemd/system/kubelet.service <<'UNIT'
[Unit]
Description=Kubernetes Kubelet Server, laid out as kops does
After=containerd.service
[Service]
EnvironmentFile=/etc/sysconfig/kubelet
ExecStart=/usr/local/bin/kubelet $DAEMON_ARGS
Restart=always
RestartSec=2s
StartLimitInterval=0
KillMode=process
[Install]
WantedBy=multi-user.target
UNIT
cat > /etc/systemd/system/kops-configuration.service <<'UNIT'
[Unit]
Description=Stand-in for kops's nodeup at boot: reinstalls kops's kubelet
[Service]
Type=oneshot
ExecStart=/bin/sh -c 'cp /opt/kops-nodeup/kubelet /usr/local/bin/kubelet.nodeup && mv -f /usr/local/bin/kubelet.nodeup /usr/local/bin/kubelet && systemctl restart kubelet.service'
UNIT
systemctl daemon-reload
systemctl enable --now containerd.service
systemctl enable kubelet.service
`

// Timed runs f, failing t with what if f fails, and logs how long it took:
// the figures docs/measurements.md quotes.
func Timed(t *testing.T, what string, f func() error) {
	t.Helper()
	s := time.Now()
	if err := f(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Logf("%s: %s", what, time.Since(s).Round(time.Millisecond))
}

// CachedKubelet is the module-built kubelet v from the cache.
func CachedKubelet(t *testing.T, v string) binaries.Binary {
	t.Helper()
	path := filepath.Join(binaries.DefaultCacheDir(), "module", v, "bin", "kubelet")
	sum, err := binaries.FileSHA256(path)
	if err != nil {
		t.Fatal(err)
	}
	return binaries.Binary{Component: "kubelet", Version: v, Path: path, SHA256: sum}
}

// RunningVersion is what the unit's running kubelet reports.
func RunningVersion(t *testing.T, ctx context.Context, n exec.Cmder, d *systemdkubelet.Driver) string {
	t.Helper()
	st, err := d.State(ctx)
	if err != nil || st.ActiveState != "active" || st.MainPID == 0 {
		t.Fatalf("unit state %+v, %v", st, err)
	}
	res, err := exec.Output(ctx, n, "sh", "-c", `"$(readlink /proc/$1/exe)" --version`, "sh", strconv.Itoa(st.MainPID))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(res.Stdout), "Kubernetes "))
}
