package binaries

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// Kinds of Spec.
const (
	// KindRelease is a released version downloaded from <BaseURL>/release/.
	KindRelease = "release"
	// KindMarker is a release marker such as latest-1.37 or stable-1.36,
	// resolved through <BaseURL>/release/<marker>.txt.
	KindMarker = "marker"
	// KindCI is a CI build: either a marker such as latest-1.38, resolved
	// through <CIBaseURL>/ci/<marker>.txt, or a CI version itself.
	KindCI = "ci"
	// KindModule is a release built from the k8s.io/kubernetes Go module.
	KindModule = "module"
	// KindFile is an executable on the local disk.
	KindFile = "file"
	// KindCheckout is a local kubernetes git checkout built with make.
	KindCheckout = "checkout"
	// KindImage is a container image holding /usr/bin/<component>, such
	// as kindest/node:<version>, pulled from its registry.
	KindImage = "image"
	// KindPatch is the module build of a release with a unified diff
	// applied: patch:<diff file>@<version>.
	KindPatch = "patch"
)

// Spec is a parsed binary source, as written per plan entry or globally.
type Spec struct {
	// Kind is one of the Kind constants.
	Kind string
	// Value is the version (release, module, and ci when it is a version,
	// always with a leading "v"), the marker name (marker, ci), the path
	// as written (file, checkout), the image reference (image), or the
	// diff's path as written, "@" and the version (patch).
	Value string
}

// patchParts splits a patch spec's Value into the diff's path and the
// version it applies to. The version follows the last "@": a path may
// hold one.
func (s Spec) patchParts() (file, version string) {
	i := strings.LastIndex(s.Value, "@")
	if i < 0 {
		return s.Value, ""
	}
	return s.Value[:i], s.Value[i+1:]
}

// String returns the spec in the form ParseSpec reads.
func (s Spec) String() string {
	switch s.Kind {
	case KindMarker:
		return s.Value
	case KindCI:
		return "ci/" + s.Value
	}
	return s.Kind + ":" + s.Value
}

var (
	// kubeVersionRE is a Kubernetes version as it appears in download paths
	// and in `--version` output; version.ParseSemantic checks it further.
	kubeVersionRE = regexp.MustCompile(`^v?[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	// releaseMarkerRE names the files under dl.k8s.io/release/ such as
	// latest-1.37.txt and stable-1.36.txt (and stable.txt, latest-1.txt).
	releaseMarkerRE = regexp.MustCompile(`^(latest|stable)(-[0-9]+(\.[0-9]+)?)?$`)
	// ciMarkerRE names the files under dl.k8s.io/ci/ such as latest-1.38.txt.
	ciMarkerRE = regexp.MustCompile(`^(latest|stable)(-[0-9]+\.[0-9]+|-fast)?$`)
)

// parseKubeVersion checks that s is a Kubernetes version and returns it with
// a leading "v".
func parseKubeVersion(s string) (string, *version.Version, bool) {
	if !kubeVersionRE.MatchString(s) {
		return "", nil, false
	}
	v, err := version.ParseSemantic(s)
	if err != nil {
		return "", nil, false
	}
	return "v" + v.String(), v, true
}

const specHelp = "want vX.Y.Z, release:, module:, patch:<diff>@vX.Y.Z, file:, checkout:, image:, latest-X.Y, stable-X.Y or ci/latest-X.Y"

// ParseSpec parses a binary source:
//
//	v1.36.3                        a release (the default source here; a run maps
//	                               a bare version through KUBELET_SOURCE, see BareVersion)
//	release:v1.36.3                a release from <BaseURL>/release/
//	latest-1.37, stable-1.36       a release marker, resolved when the run starts
//	ci/latest-1.38                 a CI build marker (or ci/<ci version>)
//	module:v1.36.3                 built from the k8s.io/kubernetes Go module
//	patch:/path/fix.diff@v1.37.2   module:v1.37.2 with a unified diff (git diff's a/ b/ paths) applied
//	file:/path/to/kubelet          a local executable
//	checkout:/path/to/kubernetes   a local kubernetes checkout, built with make
//	image:kindest/node:v1.36.3     /usr/bin/kubelet of a container image (tag or digest)
//
// A bare version with build metadata (v1.38.0-alpha.1.123+abcdef) is a CI
// build.
func ParseSpec(spec string) (Spec, error) {
	s := strings.TrimSpace(spec)
	if s == "" {
		return Spec{}, fmt.Errorf("empty kubelet source: %s", specHelp)
	}
	kind, value, hasKind := strings.Cut(s, ":")
	if hasKind {
		switch kind {
		case KindRelease:
			v, parsed, ok := parseKubeVersion(value)
			if !ok {
				return Spec{}, fmt.Errorf("kubelet source %q: %q is not a Kubernetes version such as v1.36.3", spec, value)
			}
			if parsed.BuildMetadata() != "" {
				return Spec{}, fmt.Errorf("kubelet source %q: %s is a CI build, not a release: write ci/%s", spec, v, v)
			}
			return Spec{Kind: KindRelease, Value: v}, nil
		case KindModule:
			v, parsed, ok := parseKubeVersion(value)
			if !ok || parsed.PreRelease() != "" || parsed.BuildMetadata() != "" {
				return Spec{}, fmt.Errorf("kubelet source %q: module: needs a release version such as v1.36.3", spec)
			}
			return Spec{Kind: KindModule, Value: v}, nil
		case KindPatch:
			return parsePatchSpec(spec, value)
		case KindFile, KindCheckout:
			if strings.TrimSpace(value) == "" {
				return Spec{}, fmt.Errorf("kubelet source %q: %s: needs a path", spec, kind)
			}
			return Spec{Kind: kind, Value: strings.TrimSpace(value)}, nil
		case KindImage:
			if _, err := parseImageRef(spec, value); err != nil {
				return Spec{}, err
			}
			return Spec{Kind: KindImage, Value: strings.TrimSpace(value)}, nil
		}
		return Spec{}, fmt.Errorf("unknown kubelet source %q: %s", spec, specHelp)
	}
	if name, ok := strings.CutPrefix(s, "ci/"); ok {
		if v, _, ok := parseKubeVersion(name); ok {
			return Spec{Kind: KindCI, Value: v}, nil
		}
		if ciMarkerRE.MatchString(name) {
			return Spec{Kind: KindCI, Value: name}, nil
		}
		return Spec{}, fmt.Errorf("unknown kubelet source %q: a CI source is ci/latest-X.Y (or ci/<ci version>)", spec)
	}
	if releaseMarkerRE.MatchString(s) {
		return Spec{Kind: KindMarker, Value: s}, nil
	}
	if v, parsed, ok := parseKubeVersion(s); ok {
		if parsed.BuildMetadata() != "" {
			return Spec{Kind: KindCI, Value: v}, nil
		}
		return Spec{Kind: KindRelease, Value: v}, nil
	}
	return Spec{}, fmt.Errorf("unknown kubelet source %q: %s", spec, specHelp)
}

// parsePatchSpec parses the value of patch:<diff>@<version>; the version
// is a release, as for module:.
func parsePatchSpec(spec, value string) (Spec, error) {
	file, ver := Spec{Value: strings.TrimSpace(value)}.patchParts()
	if strings.TrimSpace(file) == "" || !strings.Contains(value, "@") {
		return Spec{}, fmt.Errorf("kubelet source %q: patch: needs a diff and the release it applies to, such as patch:/path/fix.diff@v1.37.2", spec)
	}
	v, parsed, ok := parseKubeVersion(ver)
	if !ok || parsed.PreRelease() != "" || parsed.BuildMetadata() != "" {
		return Spec{}, fmt.Errorf("kubelet source %q: patch: needs a release version such as v1.37.2 after the diff's path and @ (the diff is applied to the module build of that release)", spec)
	}
	return Spec{Kind: KindPatch, Value: strings.TrimSpace(file) + "@" + v}, nil
}

// BareVersion says whether spec is a release version alone (v1.37.2 or
// 1.37.2, not release:v1.37.2), which a run takes from its default
// source (KUBELET_SOURCE) as it does the versions of its plan, and
// returns the version.
func BareVersion(spec string) (*version.Version, bool) {
	s := strings.TrimSpace(spec)
	if strings.Contains(s, ":") {
		return nil, false
	}
	if _, v, ok := parseKubeVersion(s); ok && v.BuildMetadata() == "" {
		return v, true
	}
	return nil, false
}
