package kops

// The fake kops executable (fakeaws.Kops): this test binary, run through
// a wrapper script named kops on the provider's KOPS path.

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/skewtest/clusters/kops/internal/fakeaws"
)

const fakeToolEnv = "SKEWTEST_FAKE_TOOL"

func TestMain(m *testing.M) {
	switch os.Getenv(fakeToolEnv) {
	case "kops":
		os.Exit(fakeaws.Kops(&fakeaws.Store{Path: os.Getenv(fakeaws.WorldEnv)}, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// writeFakeTools writes kops and kubectl wrappers into dir that run this
// test binary as the fakes.
func writeFakeTools(t *testing.T, dir, world string) (kops, kubectl string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("#!/bin/sh\n%s=kops %s=%s exec %s \"$@\"\n", fakeToolEnv, fakeaws.WorldEnv, world, self)
	if err := os.WriteFile(filepath.Join(dir, "kops"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// kubectl only writes what kubectl would: a shell script is enough,
	// and keeps the dump from starting this test binary ten times.
	if err := os.WriteFile(filepath.Join(dir, "kubectl"), []byte(fakeKubectl), 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "kops"), filepath.Join(dir, "kubectl")
}

// fakeKubectl answers kubectl cluster-info dump --output-directory D and
// kubectl get X -o yaml.
const fakeKubectl = `#!/bin/sh
while [ $# -gt 0 ]; do
  if [ "$1" = --output-directory ]; then mkdir -p "$2" && echo '{"kind":"NodeList","items":[]}' > "$2/nodes.json"; exit 0; fi
  shift
done
printf 'apiVersion: v1\nkind: List\nitems: []\n'
`
