package binaries

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
)

func TestKindNodeImage(t *testing.T) {
	pinned, _, ok := strings.Cut(UpstreamKindNodeImage, "@")
	if !ok {
		t.Fatalf("UpstreamKindNodeImage %q is not pinned by digest", UpstreamKindNodeImage)
	}
	pinnedVersion := version.MustParseSemantic(strings.TrimPrefix(pinned, "kindest/node:"))
	if got := KindNodeImage(pinnedVersion); got != UpstreamKindNodeImage {
		t.Errorf("KindNodeImage(%s) = %q, want the pinned %q", pinnedVersion, got, UpstreamKindNodeImage)
	}
	other := version.MustParseSemantic("v1.30.0")
	if pinnedVersion.EqualTo(other) {
		other = version.MustParseSemantic("v1.30.1")
	}
	if got, want := KindNodeImage(other), "kindest/node:v"+other.String(); got != want {
		t.Errorf("KindNodeImage(%s) = %q, want %q", other, got, want)
	}
}
