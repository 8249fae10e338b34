// Package sysctl records and restores the kernel settings that skewtest's
// clusters change on the host: a run records them before it starts
// anything that changes them, and its teardown (or `skewtest clean`) writes
// back every one that differs.
package sysctl

import (
	"errors"
	"fmt"
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
}

// procSys is where the kernel shows its settings; tests point it elsewhere.
var procSys = "/proc/sys"

func path(key string) string {
	return filepath.Join(procSys, strings.ReplaceAll(key, ".", "/"))
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

// Restore writes back every setting of saved whose value differs now, and
// returns the ones it changed as "key: now -> saved". A key that no longer
// exists is left alone.
func Restore(saved map[string]string) ([]string, error) {
	keys := make([]string, 0, len(saved))
	for k := range saved {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	now := Read(keys)
	var changed []string
	var errs []error
	for _, k := range keys {
		cur, ok := now[k]
		if !ok || cur == saved[k] {
			continue
		}
		if err := os.WriteFile(path(k), []byte(saved[k]+"\n"), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore sysctl %s to %q (now %q): %w", k, saved[k], cur, err))
			continue
		}
		changed = append(changed, fmt.Sprintf("%s: %s -> %s", k, cur, saved[k]))
	}
	return changed, errors.Join(errs...)
}
