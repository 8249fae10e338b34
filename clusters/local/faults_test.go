package local

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/skewtest/clusters/binaries"
)

// The outage proxy closes what it accepts while cut, counting it, and
// forwards once restored; closing it ends forwarded connections.
func TestAPIProxy(t *testing.T) {
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	go func() {
		for {
			c, err := up.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }() // echo
		}
	}()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &apiProxy{lis: lis, upstream: up.Addr().String(), cut: true, conns: map[net.Conn]bool{}}
	go a.serve()
	roundTrip := func() (string, error) {
		c, err := net.DialTimeout("tcp", lis.Addr().String(), time.Second)
		if err != nil {
			return "", err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("ping")); err != nil {
			return "", err
		}
		b := make([]byte, 4)
		_, err = io.ReadFull(c, b)
		return string(b), err
	}
	for range 2 {
		if got, err := roundTrip(); err == nil {
			t.Fatalf("while cut a connection got through: %q", got)
		}
	}
	if refused := a.setCut(false); refused != 2 {
		t.Errorf("refused %d connections while cut, want 2", refused)
	}
	if got, err := roundTrip(); err != nil || got != "ping" {
		t.Fatalf("restored: %q, %v; want the upstream's echo", got, err)
	}
	a.close()
	if _, err := roundTrip(); err == nil {
		t.Error("a closed proxy still forwards")
	}
}

// Feature gates the harness sets land in the kubelet's configuration, and
// none means no featureGates section.
func TestKubeletConfigFeatureGates(t *testing.T) {
	dir := t.TempDir()
	p := &Provider{dir: dir, nodeIP: net.IPv4(192, 0, 2, 10)}
	n, err := p.newNode(0, layoutOf(dir, 0).state(testRunID), nodePorts{kubelet: 1, kubeletHealthz: 2}, binaries.Binary{})
	if err != nil {
		t.Fatal(err)
	}
	v := version.MustParseSemantic("v1.37.2")
	if kc := n.kubeletConfig(v); strings.Contains(kc, "featureGates") {
		t.Errorf("no gates set, yet:\n%s", kc)
	}
	n.gates = map[string]bool{"NewVolumeManagerReconstruction": false, "Zed": true}
	want := "featureGates:\n  NewVolumeManagerReconstruction: false\n  Zed: true\n"
	if kc := n.kubeletConfig(v); !strings.HasSuffix(kc, want) {
		t.Errorf("the config does not end with\n%s\ngot:\n%s", want, kc)
	}
}
