package sysctl

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestReadRestore(t *testing.T) {
	ProcSys = t.TempDir()
	t.Cleanup(func() { ProcSys = "/proc/sys" })
	set := func(key, v string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path(key)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path(key), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	set("kernel.panic", "1\n")
	set("net.bridge.bridge-nf-call-iptables", "0\n")
	set("net.netfilter.nf_conntrack_tcp_timeout_established", "432000\n")
	saved := Read([]string{"kernel.panic", "net.bridge.bridge-nf-call-iptables", "vm.panic_on_oom"})
	if want := map[string]string{"kernel.panic": "1", "net.bridge.bridge-nf-call-iptables": "0"}; !reflect.DeepEqual(saved, want) {
		t.Fatalf("Read = %v, want %v (an absent key is left out)", saved, want)
	}
	set("kernel.panic_on_oops", "0\n")
	saved["kernel.panic_on_oops"] = "0"
	// What the kubelet and dockerd do; and someone else, who sets
	// panic_on_oops to a value that is not the kubelet's.
	set("kernel.panic", "10\n")
	set("net.bridge.bridge-nf-call-iptables", "1\n")
	set("kernel.panic_on_oops", "5\n")
	changed, left, err := Restore(saved)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"kernel.panic: 10 -> 1", "net.bridge.bridge-nf-call-iptables: 1 -> 0"}; !reflect.DeepEqual(changed, want) {
		t.Errorf("Restore changed %q, want %q", changed, want)
	}
	if want := []string{"kernel.panic_on_oops: 5 (0 before the run)"}; !reflect.DeepEqual(left, want) {
		t.Errorf("Restore left %q, want %q: a value that is not the run's was set by someone else", left, want)
	}
	if now := Read([]string{"kernel.panic_on_oops"}); now["kernel.panic_on_oops"] != "5" {
		t.Errorf("Restore wrote over someone else's kernel.panic_on_oops: %v", now)
	}
	delete(saved, "kernel.panic_on_oops")
	if now := Read(Keys); now["kernel.panic"] != "1" || now["net.bridge.bridge-nf-call-iptables"] != "0" {
		t.Errorf("after Restore: %v", now)
	}
	if changed, _, err := Restore(saved); err != nil || len(changed) != 0 {
		t.Errorf("a second Restore changed %q, %v", changed, err)
	}
}

func TestReadThisHost(t *testing.T) {
	got := Read(Keys)
	if _, ok := got["kernel.panic"]; !ok {
		t.Errorf("kernel.panic not read from /proc/sys: %v", got)
	}
}
