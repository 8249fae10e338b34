package kind

import (
	"errors"
	"io"
	osexec "os/exec"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	kindexec "sigs.k8s.io/kind/pkg/exec"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/exec"
)

// fakeKindCmd fails the way kind's docker provider does: a RunError whose
// Inner is the docker exec's *exec.ExitError.
type fakeKindCmd struct{ code int }

func (f *fakeKindCmd) Run() error {
	if f.code == 0 {
		return nil
	}
	inner := osexec.Command("sh", "-c", "exit "+string(rune('0'+f.code))).Run()
	return &kindexec.RunError{Command: []string{"docker", "exec"}, Inner: inner}
}
func (f *fakeKindCmd) SetEnv(...string) kindexec.Cmd    { return f }
func (f *fakeKindCmd) SetStdin(io.Reader) kindexec.Cmd  { return f }
func (f *fakeKindCmd) SetStdout(io.Writer) kindexec.Cmd { return f }
func (f *fakeKindCmd) SetStderr(io.Writer) kindexec.Cmd { return f }
func (f *fakeKindCmd) Start() error                     { return nil }
func (f *fakeKindCmd) Wait() error                      { return nil }

func TestKindCmdExitCode(t *testing.T) {
	tests := []struct {
		code int
		want int
	}{{0, 0}, {3, 3}, {7, 7}}
	for _, tt := range tests {
		err := (&kindCmd{inner: &fakeKindCmd{code: tt.code}}).Run()
		if got := exec.ExitCode(err); got != tt.want {
			t.Errorf("exit %d: exec.ExitCode = %d (err %v)", tt.code, got, err)
		}
		var re *kindexec.RunError
		if tt.code != 0 && !errors.As(err, &re) {
			t.Errorf("exit %d: kind's RunError is not kept in the chain: %v", tt.code, err)
		}
	}
	// An error that is not a RunError (docker not found) has no exit code.
	plain := (&kindCmd{inner: &errCmd{errors.New("docker: not found")}}).Run()
	if exec.ExitCode(plain) != -1 {
		t.Errorf("a failure to run has exit code %d, want -1", exec.ExitCode(plain))
	}
}

type errCmd struct{ err error }

func (e *errCmd) Run() error                       { return e.err }
func (e *errCmd) SetEnv(...string) kindexec.Cmd    { return e }
func (e *errCmd) SetStdin(io.Reader) kindexec.Cmd  { return e }
func (e *errCmd) SetStdout(io.Writer) kindexec.Cmd { return e }
func (e *errCmd) SetStderr(io.Writer) kindexec.Cmd { return e }
func (e *errCmd) Start() error                     { return nil }
func (e *errCmd) Wait() error                      { return nil }

func TestCSIDaemonSet(t *testing.T) {
	ds := csiDaemonSet([]string{"w1", "w2"})
	pod := ds.Spec.Template.Spec
	c := pod.Containers[0]
	var terms []corev1.NodeSelectorTerm
	if a := pod.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	}
	if len(terms) != 1 || len(terms[0].MatchExpressions) != 1 {
		t.Fatalf("want one required node selector term of one expression, got %+v", terms)
	}
	if e := terms[0].MatchExpressions[0]; e.Key != corev1.LabelHostname || e.Operator != corev1.NodeSelectorOpIn || !slices.Equal(e.Values, []string{"w1", "w2"}) {
		t.Errorf("not pinned to the workers w1 and w2 (and only them): %+v", e)
	}
	if pod.NodeSelector != nil {
		t.Errorf("a node selector besides the affinity: %v", pod.NodeSelector)
	}
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Error("the driver must be privileged to mount")
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/var/lib/kubelet" || c.VolumeMounts[0].MountPropagation == nil || *c.VolumeMounts[0].MountPropagation != "Bidirectional" {
		t.Errorf("the kubelet root must be mounted Bidirectional so mounts reach the node: %+v", c.VolumeMounts)
	}
}

func TestChooseNodeImage(t *testing.T) {
	pinned, _, _ := strings.Cut(UpstreamNodeImage, "@")
	pinnedVersion := version.MustParseSemantic(strings.TrimPrefix(pinned, "kindest/node:"))
	v := version.MustParseSemantic("v1.37.2")
	tests := []struct {
		name          string
		setting       string
		privateDocker bool
		v             *version.Version
		want          string
		offline       bool
	}{
		{"default on a host needing the private dockerd builds offline", "", true, v, "", true},
		{"default on a normal Docker host pulls kindest/node", "", false, v, "kindest/node:v1.37.2", false},
		{"the version kind pins is pulled by digest", "", false, pinnedVersion, UpstreamNodeImage, false},
		{"offline forced", "offline", false, v, "", true},
		{"upstream forced", "upstream", true, v, "kindest/node:v1.37.2", false},
		{"an explicit reference", "example.com/node:x", true, v, "example.com/node:x", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref, offline := chooseNodeImage(tt.setting, tt.privateDocker, tt.v)
			if ref != tt.want || offline != tt.offline {
				t.Errorf("chooseNodeImage(%q, %v, %v) = %q, %v; want %q, %v", tt.setting, tt.privateDocker, tt.v, ref, offline, tt.want, tt.offline)
			}
		})
	}
}

func TestChooseCSI(t *testing.T) {
	for _, tc := range []struct {
		setting      string
		offlineImage bool
		workers      int
		want         string
	}{
		{"", true, 1, CSISkewtest},
		{"", false, 1, CSIHostpath},
		{"", false, 2, CSISkewtest},
		{"", true, 3, CSISkewtest},
		{CSIHostpath, true, 1, CSIHostpath},
		{CSISkewtest, false, 1, CSISkewtest},
	} {
		if got := chooseCSI(tc.setting, tc.offlineImage, tc.workers); got != tc.want {
			t.Errorf("chooseCSI(%q, offline image %v, %d workers) = %q, want %q", tc.setting, tc.offlineImage, tc.workers, got, tc.want)
		}
	}
	_, err := New(Config{RunID: "r", APIServerVersion: version.MustParseSemantic("v1.37.2"), Kubelets: []binaries.Binary{{Path: "/k", Version: "v1.37.2"}}, CSI: "nfs"})
	if err == nil || !strings.Contains(err.Error(), `KIND_CSI="nfs"`) || !strings.Contains(err.Error(), "want skewtest") {
		t.Fatalf("New with KIND_CSI=nfs: %v; want an error naming it and the choices", err)
	}
}
