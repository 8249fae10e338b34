package local

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/skewtest/clusters/hostlock"
)

func TestCheckHostKubelet(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "kubelet.sock")
	if err := checkHostKubelet(sock, DefaultRunRoot); err != nil {
		t.Errorf("no socket: %v", err)
	}
	// A stale socket file: nobody answers.
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("stale socket not left: %v", err)
	}
	if err := checkHostKubelet(sock, DefaultRunRoot); err != nil {
		t.Errorf("stale socket: %v", err)
	}
	// Served by a process that is no run's kubelet (this test, here).
	os.Remove(sock)
	l, err = net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	err = checkHostKubelet(sock, DefaultRunRoot)
	if !errors.Is(err, hostlock.ErrHostInUse) || !strings.Contains(err.Error(), sock) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d:", os.Getpid())) {
		t.Errorf("served socket: %v; want ErrHostInUse naming %s", err, sock)
	}
}

func TestIsRunKubelet(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want bool
	}{
		{[]string{"kubelet", "--root-dir=/var/lib/skewtest/20260101-000000-abcd/kubelet"}, true},
		{[]string{"kubelet", "--root-dir", "/var/lib/skewtest/x/kubelet2"}, true},
		{[]string{"/usr/local/bin/kubelet", "--config=/var/lib/kubelet/kubelet.conf"}, false},
		{[]string{"kubelet", "--root-dir=/var/lib/skewtest-other/kubelet"}, false},
	} {
		if got := isRunKubelet(tc.argv, "/var/lib/skewtest"); got != tc.want {
			t.Errorf("isRunKubelet(%q) = %v, want %v", tc.argv, got, tc.want)
		}
	}
}
