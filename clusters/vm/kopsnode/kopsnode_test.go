package kopsnode

import (
	"bytes"
	"os"
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
// KillMode=process; systemd splits $DAEMON_ARGS into arguments.
func TestUnitText(t *testing.T) {
	for _, want := range []string{
		"EnvironmentFile=" + EnvironmentFile + "\n",
		"ExecStart=" + Binary + " $DAEMON_ARGS\n",
		"Restart=always\n", "RestartSec=2s\n", "KillMode=process\n",
	} {
		if !strings.Contains(unitText, want) {
			t.Errorf("unit lacks %q:\n%s", want, unitText)
		}
	}
}
