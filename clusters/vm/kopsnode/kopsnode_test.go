package kopsnode

import (
	"bytes"
	"os"
	osexec "os/exec" // the wrapper script run as systemd would
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The kubeconfig the host gets carries its credentials inline (the files
// are the guest's) and names the host's end of the forward.
func TestWriteKubeconfig(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{"ca.crt": []byte("CA"), "admin.crt": []byte("CERT"), "admin.key": []byte("KEY")}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["skewtest"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:41234", CertificateAuthority: filepath.Join(dir, "ca.crt")}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificate: filepath.Join(dir, "admin.crt"), ClientKey: filepath.Join(dir, "admin.key")}
	kc.Contexts["skewtest"] = &clientcmdapi.Context{Cluster: "skewtest", AuthInfo: "admin"}
	kc.CurrentContext = "skewtest"
	from := filepath.Join(dir, "admin.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, from); err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(dir, "out", KubeconfigFile)
	if err := writeKubeconfig(from, "https://127.0.0.1:40100", to); err != nil {
		t.Fatal(err)
	}
	got, err := clientcmd.LoadFromFile(to)
	if err != nil {
		t.Fatal(err)
	}
	c, a := got.Clusters["skewtest"], got.AuthInfos["admin"]
	if c == nil || a == nil || got.CurrentContext != "skewtest" {
		t.Fatalf("kubeconfig lost its cluster, user or context: %+v", got)
	}
	if c.Server != "https://127.0.0.1:40100" {
		t.Errorf("server %s, want the host's end of the forward", c.Server)
	}
	if !bytes.Equal(c.CertificateAuthorityData, files["ca.crt"]) || !bytes.Equal(a.ClientCertificateData, files["admin.crt"]) || !bytes.Equal(a.ClientKeyData, files["admin.key"]) {
		t.Errorf("credentials not inline: CA %q cert %q key %q", c.CertificateAuthorityData, a.ClientCertificateData, a.ClientKeyData)
	}
	if c.CertificateAuthority != "" || a.ClientCertificate != "" || a.ClientKey != "" {
		t.Errorf("kubeconfig still names the guest's files: %q %q %q", c.CertificateAuthority, a.ClientCertificate, a.ClientKey)
	}
}

// The unit is kops': the binary, the environment file, Restart=always,
// KillMode=process; systemd splits $DAEMON_ARGS into arguments. A further
// node's unit runs its own binary with its own flags, and no file of one
// layout is another's.
func TestUnitText(t *testing.T) {
	first, second := layoutOf(0), layoutOf(1)
	for _, tc := range []struct {
		l    NodeLayout
		want []string
	}{
		{first, []string{"EnvironmentFile=" + EnvironmentFile + "\n", "ExecStart=" + Binary + " $DAEMON_ARGS\n"}},
		{second, []string{"EnvironmentFile=/etc/sysconfig/kubelet-2\n", "ExecStart=/usr/local/bin/kubelet-2-ns $DAEMON_ARGS\n"}},
	} {
		text := tc.l.unitText()
		for _, want := range append(tc.want, "Restart=always\n", "RestartSec=2s\n", "KillMode=process\n") {
			if !strings.Contains(text, want) {
				t.Errorf("unit of %s lacks %q:\n%s", tc.l.KubeletUnit, want, text)
			}
		}
	}
	if first.KubeletUnit != Unit || first.KubeletUnitFile != UnitFile || first.KubeletBinary != Binary || first.KubeletEnvironmentFile != EnvironmentFile || first.KubeletConfigFile != ConfigFile {
		t.Errorf("the first node's layout %+v is not kops's", first)
	}
	if second.KubeletUnit != "kubelet-2" || second.KubeletUnitFile != "/lib/systemd/system/kubelet-2.service" || second.KubeletConfigFile != "/var/lib/kubelet/kubelet-2.conf" {
		t.Errorf("the second node's layout: %+v", second)
	}
	seen := map[string]bool{}
	for _, f := range append(first.files(), second.files()...) {
		if seen[f] {
			t.Errorf("%s is in two layouts", f)
		}
		seen[f] = true
	}
}

// A further node's unit runs its kubelet through the wrapper, in the
// namespace the handoff names, with the unit's arguments.
func TestWrapperText(t *testing.T) {
	l := layoutOf(1)
	w := filepath.Join(t.TempDir(), "wrapper")
	if err := os.WriteFile(w, []byte(l.wrapperText([]string{"echo", "in ns", "it's"})), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := osexec.Command("sh", w, "--config=/var/lib/kubelet/kubelet-2.conf", "--v=2").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "in ns it's /usr/local/bin/kubelet-2 --config=/var/lib/kubelet/kubelet-2.conf --v=2\n"; string(out) != want {
		t.Errorf("the wrapper ran %q, want %q", out, want)
	}
	if layoutOf(0).KubeletWrapper != "" {
		t.Errorf("the first node's kubelet is wrapped: %+v", layoutOf(0))
	}
}
