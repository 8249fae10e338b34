package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"sigs.k8s.io/skewtest/internal/testgate"
)

func mkNode(name, ip string, cidrs ...string) node {
	var n node
	n.Metadata.Name = name
	if len(cidrs) > 0 {
		n.Spec.PodCIDR = cidrs[0]
		n.Spec.PodCIDRs = cidrs
	}
	n.Status.Addresses = append(n.Status.Addresses, struct {
		Type    string `json:"type"`
		Address string `json:"address"`
	}{"Hostname", name}, struct {
		Type    string `json:"type"`
		Address string `json:"address"`
	}{"InternalIP", ip})
	return n
}

func TestConflist(t *testing.T) {
	b, err := conflist([]string{"10.244.1.0/24"})
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		CNIVersion string `json:"cniVersion"`
		Plugins    []struct {
			Type      string `json:"type"`
			Bridge    string `json:"bridge"`
			IsGateway bool   `json:"isGateway"`
			IPAM      struct {
				Type   string                `json:"type"`
				Ranges [][]map[string]string `json:"ranges"`
				Routes []map[string]string   `json:"routes"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if c.CNIVersion != "1.0.0" || len(c.Plugins) != 2 || c.Plugins[0].Type != "bridge" || !c.Plugins[0].IsGateway || c.Plugins[1].Type != "portmap" {
		t.Fatalf("%s", b)
	}
	ipam := c.Plugins[0].IPAM
	if ipam.Type != "host-local" || ipam.Ranges[0][0]["subnet"] != "10.244.1.0/24" || ipam.Routes[0]["dst"] != "0.0.0.0/0" {
		t.Errorf("%s", b)
	}
	b, err = conflist([]string{"10.244.1.0/24", "fd00:10:244:1::/64"})
	if err != nil || len(b) == 0 {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Plugins[0].IPAM.Ranges) != 2 || len(c.Plugins[0].IPAM.Routes) != 2 || c.Plugins[0].IPAM.Routes[1]["dst"] != "::/0" {
		t.Errorf("dual stack: %s", b)
	}
	if _, err := conflist([]string{"nope"}); err == nil {
		t.Error("bad CIDR accepted")
	}
}

func TestDesiredRoutes(t *testing.T) {
	nodes := []node{
		mkNode("cp", "172.18.0.2", "10.244.0.0/24"),
		mkNode("w1", "172.18.0.3", "10.244.1.0/24"),
		mkNode("w2", "172.18.0.4"), // no podCIDR yet
	}
	got := desiredRoutes("cp", nodes)
	if !reflect.DeepEqual(got, map[string]string{"10.244.1.0/24": "172.18.0.3"}) {
		t.Errorf("%v", got)
	}
	// No IPv6 InternalIP: no v6 route.
	nodes[1].Spec.PodCIDRs = append(nodes[1].Spec.PodCIDRs, "fd00::/64")
	if got := desiredRoutes("cp", nodes); len(got) != 1 {
		t.Errorf("%v", got)
	}
}

func TestReconcile(t *testing.T) {
	dir := t.TempDir()
	var replaced, removed []string
	r := &reconciler{node: "w1", confDir: dir, routes: map[string]string{},
		replace: func(dst *net.IPNet, gw net.IP) error {
			replaced = append(replaced, dst.String()+" via "+gw.String())
			return nil
		},
		remove: func(dst *net.IPNet, gw net.IP) error {
			removed = append(removed, dst.String()+" via "+gw.String())
			return nil
		},
	}
	if err := r.reconcile([]node{mkNode("w1", "172.18.0.3")}); err == nil {
		t.Error("no error without a podCIDR")
	}
	if err := r.reconcile([]node{mkNode("other", "1.2.3.4")}); err == nil {
		t.Error("no error when the node is missing")
	}
	nodes := []node{mkNode("cp", "172.18.0.2", "10.244.0.0/24"), mkNode("w1", "172.18.0.3", "10.244.1.0/24")}
	if err := r.reconcile(nodes); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(replaced, []string{"10.244.0.0/24 via 172.18.0.2"}) {
		t.Errorf("replaced %v", replaced)
	}
	b, err := os.ReadFile(filepath.Join(dir, confName))
	if err != nil || !json.Valid(b) {
		t.Fatalf("conflist: %v %s", err, b)
	}
	// The control plane goes away: its route is removed.
	if err := r.reconcile(nodes[1:]); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(removed, []string{"10.244.0.0/24 via 172.18.0.2"}) || len(r.routes) != 0 {
		t.Errorf("removed %v, routes %v", removed, r.routes)
	}
	if changed, err := writeIfChanged(filepath.Join(dir, confName), b); err != nil || changed {
		t.Errorf("rewrote an unchanged conflist: %v %v", changed, err)
	}
}

func TestRouteMessage(t *testing.T) {
	_, dst, _ := net.ParseCIDR("10.244.1.0/24")
	msg, err := routeMessage(rtmNewRoute, 7, dst, net.ParseIP("172.18.0.3"))
	if err != nil {
		t.Fatal(err)
	}
	// header 16 + rtmsg 12 + RTA_DST 8 + RTA_GATEWAY 8
	if len(msg) != 44 || binary.NativeEndian.Uint32(msg[0:4]) != 44 {
		t.Fatalf("length %d", len(msg))
	}
	if typ := binary.NativeEndian.Uint16(msg[4:6]); typ != unix.RTM_NEWROUTE {
		t.Errorf("type %d", typ)
	}
	flags := binary.NativeEndian.Uint16(msg[6:8])
	if flags&unix.NLM_F_REPLACE == 0 || flags&unix.NLM_F_CREATE == 0 || flags&unix.NLM_F_ACK == 0 {
		t.Errorf("flags %#x", flags)
	}
	if binary.NativeEndian.Uint32(msg[8:12]) != 7 {
		t.Error("seq")
	}
	rtm := msg[16:28]
	if rtm[0] != unix.AF_INET || rtm[1] != 24 || rtm[4] != unix.RT_TABLE_MAIN || rtm[7] != unix.RTN_UNICAST {
		t.Errorf("rtmsg %v", rtm)
	}
	if binary.NativeEndian.Uint16(msg[30:32]) != unix.RTA_DST || !net.IP(msg[32:36]).Equal(net.ParseIP("10.244.1.0")) {
		t.Errorf("RTA_DST %v", msg[28:36])
	}
	if binary.NativeEndian.Uint16(msg[38:40]) != unix.RTA_GATEWAY || !net.IP(msg[40:44]).Equal(net.ParseIP("172.18.0.3")) {
		t.Errorf("RTA_GATEWAY %v", msg[36:44])
	}
	_, dst6, _ := net.ParseCIDR("fd00:10:244:1::/64")
	msg, err = routeMessage(rtmDelRoute, 8, dst6, net.ParseIP("fc00::3"))
	if err != nil || len(msg) != 16+12+20+20 || msg[16] != unix.AF_INET6 {
		t.Errorf("v6: %v %d", err, len(msg))
	}
	if _, err := routeMessage(rtmNewRoute, 9, dst6, net.ParseIP("172.18.0.3")); err == nil {
		t.Error("mixed families accepted")
	}
}

func TestParseNetlinkAcks(t *testing.T) {
	ack := func(seq uint32, code int32) []byte {
		b := make([]byte, 36)
		binary.NativeEndian.PutUint32(b[0:4], 36)
		binary.NativeEndian.PutUint16(b[4:6], unix.NLMSG_ERROR)
		binary.NativeEndian.PutUint32(b[8:12], seq)
		binary.NativeEndian.PutUint32(b[16:20], uint32(code))
		return b
	}
	b := append(ack(1, 0), ack(2, -int32(unix.ENETUNREACH))...)
	got, err := parseNetlinkAcks(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].errno != 0 || got[1].seq != 2 || got[1].errno != unix.ENETUNREACH {
		t.Errorf("%+v", got)
	}
	if _, err := parseNetlinkAcks([]byte{200, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}); err == nil {
		t.Error("bad length accepted")
	}
}

// TestRouteRequestInNetns adds and deletes a real route, in a network
// namespace of its own, when run as root.
func TestRouteRequestInNetns(t *testing.T) {
	testgate.RequireRoot(t, "adds and deletes a route in a network namespace of its own")
	// A new netns for this locked thread only.
	done := make(chan error, 1)
	go func() {
		// This goroutine's thread is thrown away afterwards (never unlocked).
		runtimeLockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			done <- err
			return
		}
		done <- routeRoundTrip()
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func runtimeLockOSThread() { runtime.LockOSThread() }

// routeRoundTrip runs in a fresh network namespace: a veth pair gives an
// on-link gateway; the route is added (twice: replace), checked with ip,
// deleted (twice: a missing route is fine).
func routeRoundTrip() error {
	ip := func(args ...string) (string, error) {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("ip %v: %v: %s", args, err, out)
		}
		return string(out), nil
	}
	for _, args := range [][]string{
		{"link", "add", "v0", "type", "veth", "peer", "name", "v1"},
		{"addr", "add", "192.0.2.1/24", "dev", "v0"},
		{"link", "set", "v0", "up"},
		{"link", "set", "v1", "up"},
	} {
		if _, err := ip(args...); err != nil {
			return err
		}
	}
	_, dst, _ := net.ParseCIDR("10.244.1.0/24")
	for i := 0; i < 2; i++ {
		if err := routeRequest(rtmNewRoute, dst, net.ParseIP("192.0.2.2")); err != nil {
			return fmt.Errorf("add: %w", err)
		}
	}
	out, err := ip("route", "show", "10.244.1.0/24")
	if err != nil {
		return err
	}
	if !strings.Contains(out, "via 192.0.2.2 dev v0") {
		return fmt.Errorf("route not in table: %q", out)
	}
	// Replace with another gateway.
	if err := routeRequest(rtmNewRoute, dst, net.ParseIP("192.0.2.3")); err != nil {
		return fmt.Errorf("replace: %w", err)
	}
	if out, _ := ip("route", "show", "10.244.1.0/24"); !strings.Contains(out, "via 192.0.2.3") || strings.Count(out, "via") != 1 {
		return fmt.Errorf("route not replaced: %q", out)
	}
	for i := 0; i < 2; i++ {
		if err := routeRequest(rtmDelRoute, dst, net.ParseIP("192.0.2.3")); err != nil {
			return fmt.Errorf("delete: %w", err)
		}
	}
	if out, _ := ip("route", "show", "10.244.1.0/24"); strings.TrimSpace(out) != "" {
		return fmt.Errorf("route not deleted: %q", out)
	}
	// An unreachable gateway is an error from the kernel.
	if err := routeRequest(rtmNewRoute, dst, net.ParseIP("198.51.100.1")); err == nil {
		return fmt.Errorf("route via an unreachable gateway accepted")
	}
	return nil
}
