package binaries

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
	kinddefaults "sigs.k8s.io/kind/pkg/apis/config/defaults"
)

// UpstreamKindNodeImage is the node image the kind release in go.mod uses
// by default, pinned by digest.
const UpstreamKindNodeImage = kinddefaults.Image

// KindNodeImage is the kindest/node image of Kubernetes version v, pinned
// by digest when it is the one the kind release in go.mod pins: where
// KUBELET_SOURCE=kindest takes each plan version's kubelet from (an
// image: source), and the node image the kind provider pulls by default.
// It lives here, beside the image: source, so that choosing a kubelet
// needs no provider package.
func KindNodeImage(v *version.Version) string {
	ref := "kindest/node:v" + v.String()
	if base, _, ok := strings.Cut(UpstreamKindNodeImage, "@"); ok && base == ref {
		return UpstreamKindNodeImage
	}
	return ref
}
