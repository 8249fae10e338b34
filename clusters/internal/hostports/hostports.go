// Package hostports hands out TCP ports for the daemons a provider starts
// on this host (an API server, etcd, kubelets, a guest's forwarded ports).
//
// A port the kernel picks for a listener on port 0 lies in its ephemeral
// range (net.ipv4.ip_local_port_range), which is also where every outbound
// connection takes its source port. Closed and handed to a daemon that
// binds it seconds later, such a port can meanwhile be taken by one of
// the cluster's own long-lived connections (a kubelet's watch, the API
// server's to etcd): the daemon then cannot bind it for as long as that
// connection lives. A kubelet, for one, retries its healthz listener every
// 5 s without exiting, and its node never becomes healthy. So Free picks
// ports outside that range, where no outbound connection goes, and checks
// that nothing listens on them.
package hostports

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// rangeFile is the kernel's ephemeral port range.
var rangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// Bounds of the ports Free picks from, outside the ephemeral range: below
// minPort lie the well-known ports and the usual fixed ones of local
// services (8080, 9090, ...).
const (
	minPort = 10000
	maxPort = 65535
)

var (
	mu sync.Mutex
	// given are the ports this process handed out, not handed out twice
	// while others are left: the daemon of one cluster may not have bound
	// its port yet when another cluster asks.
	given = map[int]bool{}
)

// Free returns n distinct TCP ports nothing listens on now, outside the
// kernel's ephemeral port range. When that range leaves fewer than n
// candidates, it falls back to ports the kernel picks (in the range).
func Free(n int) ([]int, error) {
	lo, hi, err := ephemeralRange()
	if err != nil {
		return nil, err
	}
	var candidates []int
	for p := minPort; p <= maxPort; p++ {
		if p < lo || p > hi {
			candidates = append(candidates, p)
		}
	}
	if len(candidates) < 4*n {
		return kernelPicked(n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(given)+n > len(candidates)/2 {
		clear(given)
	}
	var out []int
	start := rand.IntN(len(candidates))
	for i := 0; i < len(candidates) && len(out) < n; i++ {
		p := candidates[(start+i)%len(candidates)]
		if given[p] || !listenable(p) {
			continue
		}
		given[p] = true
		out = append(out, p)
	}
	if len(out) < n {
		return nil, fmt.Errorf("hostports: only %d of %d ports between %d and %d outside the ephemeral range %d-%d (%s) are free", len(out), n, minPort, maxPort, lo, hi, rangeFile)
	}
	return out, nil
}

// ephemeralRange reads the kernel's ephemeral port range.
func ephemeralRange() (lo, hi int, err error) {
	b, err := os.ReadFile(rangeFile)
	if err != nil {
		return 0, 0, fmt.Errorf("hostports: read the ephemeral port range: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) == 2 {
		lo, err1 := strconv.Atoi(f[0])
		hi, err2 := strconv.Atoi(f[1])
		if err := errors.Join(err1, err2); err == nil && 0 < lo && lo <= hi {
			return lo, hi, nil
		}
	}
	return 0, 0, fmt.Errorf("hostports: %s holds %q, not two port numbers", rangeFile, strings.TrimSpace(string(b)))
}

// listenable tells whether nothing holds TCP port p on any address: a
// listener on all addresses conflicts with any other socket bound to p.
func listenable(p int) bool {
	l, err := net.Listen("tcp", ":"+strconv.Itoa(p))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// kernelPicked is n ports the kernel picks for listeners on port 0, all
// held until each is known.
func kernelPicked(n int) ([]int, error) {
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("hostports: allocate a port: %w", err)
		}
		defer l.Close()
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}
