// Package sysctl records and restores the kernel settings that skewtest's
// clusters change on the host: a run records them before it starts
// anything that changes them, and its teardown (or `skewtest clean`) writes
// back every one that differs and still holds the run's value.
package sysctl

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Keys are the settings runs change, by who changes them:
//   - the kubelet, at start (setupKernelTunables, unless
//     --protect-kernel-defaults): kernel.panic, kernel.panic_on_oops,
//     vm.overcommit_memory, vm.panic_on_oom, kernel.keys.root_maxkeys,
//     kernel.keys.root_maxbytes. A kind node's kubelet runs privileged and
//     changes the host's too: kernel.* and vm.* are not per network
//     namespace.
//   - the CNI bridge plugin (isGateway) and dockerd: IP forwarding.
//   - dockerd: bridge netfilter, when it loads br_netfilter.
//   - kube-proxy (in a kind node, privileged): conntrack limits and
//     route_localnet.
//   - the local provider, for clusters of many nodes: the inotify
//     instances root may hold.
var Keys = []string{
	"kernel.panic",
	"kernel.panic_on_oops",
	"kernel.keys.root_maxkeys",
	"kernel.keys.root_maxbytes",
	"vm.overcommit_memory",
	"vm.panic_on_oom",
	"net.ipv4.ip_forward",
	"net.ipv6.conf.all.forwarding",
	"net.ipv4.conf.all.route_localnet",
	"net.bridge.bridge-nf-call-iptables",
	"net.bridge.bridge-nf-call-ip6tables",
	"net.netfilter.nf_conntrack_max",
	"net.netfilter.nf_conntrack_tcp_timeout_established",
	"net.netfilter.nf_conntrack_tcp_timeout_close_wait",
	"fs.inotify.max_user_instances",
}

// RunValues are the values the run's components set, where they are fixed:
// the kubelet's setupKernelTunables (pkg/kubelet/cm), the CNI bridge's and
// dockerd's forwarding, dockerd's bridge netfilter, kube-proxy's
// route_localnet and conntrack timeouts. Restore writes a setting back only
// while it still holds the run's value: any other value was set since by
// someone else (an administrator, a sysctl.d file, another tool), which is
// theirs to keep. Settings whose value the run's component computes
// (nf_conntrack_max, from the CPUs) are not listed and are written back
// whenever they differ.
var RunValues = map[string]string{
	"kernel.panic":                                       "10",
	"kernel.panic_on_oops":                               "1",
	"kernel.keys.root_maxkeys":                           "1000000",
	"kernel.keys.root_maxbytes":                          "25000000",
	"vm.overcommit_memory":                               "1",
	"vm.panic_on_oom":                                    "0",
	"net.ipv4.ip_forward":                                "1",
	"net.ipv6.conf.all.forwarding":                       "1",
	"net.ipv4.conf.all.route_localnet":                   "1",
	"net.bridge.bridge-nf-call-iptables":                 "1",
	"net.bridge.bridge-nf-call-ip6tables":                "1",
	"net.netfilter.nf_conntrack_tcp_timeout_established": "86400",
	"net.netfilter.nf_conntrack_tcp_timeout_close_wait":  "3600",
	"fs.inotify.max_user_instances":                      "1024",
}

// ProcSys is where the kernel shows its settings; the tests of the
// packages that record and restore them point it at a directory of their
// own.
var ProcSys = "/proc/sys"

func path(key string) string {
	return filepath.Join(ProcSys, strings.ReplaceAll(key, ".", "/"))
}

// Read returns the current value of each of keys that exists on this host
// (a key of a module that is not loaded, such as net.bridge.* without
// br_netfilter, is absent).
func Read(keys []string) map[string]string {
	out := map[string]string{}
	for _, k := range keys {
		if b, err := os.ReadFile(path(k)); err == nil {
			out[k] = strings.Join(strings.Fields(string(b)), " ")
		}
	}
	return out
}

// Restore writes back every setting of saved whose value differs now and
// is still the run's (RunValues), and returns the ones it changed as
// "key: now -> saved", and those it left because someone else set them
// since as "key: now (saved before the run)". A key that no longer exists
// is left alone.
func Restore(saved map[string]string) (changed, left []string, err error) {
	keys := make([]string, 0, len(saved))
	for k := range saved {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	now := Read(keys)
	var errs []error
	for _, k := range keys {
		cur, ok := now[k]
		if !ok || cur == saved[k] {
			continue
		}
		if run, known := RunValues[k]; known && cur != run {
			left = append(left, fmt.Sprintf("%s: %s (%s before the run)", k, cur, saved[k]))
			continue
		}
		if err := Set(k, saved[k]); err != nil {
			errs = append(errs, fmt.Errorf("restore sysctl %s to %q (now %q): %w", k, saved[k], cur, err))
			continue
		}
		changed = append(changed, fmt.Sprintf("%s: %s -> %s", k, cur, saved[k]))
	}
	return changed, left, errors.Join(errs...)
}

// RestoreLogged is Restore, saying in log (with args) each setting it
// wrote back and, as a warning, each it left to whoever set it since.
func RestoreLogged(saved map[string]string, log *slog.Logger, args ...any) error {
	changed, left, err := Restore(saved)
	for _, c := range changed {
		log.Info("kernel setting restored", append([]any{"change", c}, args...)...)
	}
	for _, l := range left {
		log.Warn("kernel setting left as it is: someone else set it since the run", append([]any{"setting", l}, args...)...)
	}
	return err
}

// Set writes value to the setting key.
func Set(key, value string) error {
	return os.WriteFile(path(key), []byte(value+"\n"), 0o644)
}
