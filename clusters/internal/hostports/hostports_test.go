package hostports

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// withRange points Free at a range file holding text.
func withRange(t *testing.T, text string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "ip_local_port_range")
	if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	old := rangeFile
	rangeFile = f
	t.Cleanup(func() { rangeFile = old })
}

func TestFreeIsOutsideTheEphemeralRange(t *testing.T) {
	withRange(t, "32768\t60999\n")
	seen := map[int]bool{}
	for range 3 {
		ports, err := Free(29) // a 12-node local cluster's
		if err != nil {
			t.Fatal(err)
		}
		if len(ports) != 29 {
			t.Fatalf("got %d ports, want 29", len(ports))
		}
		for _, p := range ports {
			if p < minPort || p > maxPort || (p >= 32768 && p <= 60999) {
				t.Errorf("port %d is in the ephemeral range 32768-60999 or outside %d-%d", p, minPort, maxPort)
			}
			if seen[p] {
				t.Errorf("port %d handed out twice", p)
			}
			seen[p] = true
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				t.Errorf("port %d is not free: %v", p, err)
				continue
			}
			l.Close()
		}
	}
}

// A port something listens on is never handed out.
func TestFreeSkipsABoundPort(t *testing.T) {
	// Only 10000-10099 and 65500-65535 are outside this range.
	withRange(t, "10100 65499")
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	busy := map[int]bool{}
	for p := minPort; p < minPort+60; p++ {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue // someone else's: busy too
		}
		held = append(held, l)
		busy[p] = true
	}
	ports, err := Free(20)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ports {
		if busy[p] {
			t.Errorf("port %d is held by a listener, yet handed out", p)
		}
		if p >= 10100 && p <= 65499 {
			t.Errorf("port %d is in the ephemeral range", p)
		}
	}
}

// A range that leaves too few ports outside it falls back to the kernel's
// picks; a range file that says nothing usable is an error naming it.
func TestFreeRangeEdges(t *testing.T) {
	withRange(t, "1024 65535")
	ports, err := Free(5)
	if err != nil || len(ports) != 5 {
		t.Fatalf("Free(5) with no room outside the range = %v, %v", ports, err)
	}
	withRange(t, "banana")
	if _, err := Free(1); err == nil || !strings.Contains(err.Error(), "not two port numbers") || !strings.Contains(err.Error(), rangeFile) {
		t.Errorf("Free with a bad range file: %v", err)
	}
}
