package binaries

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// kindVersionFile is where a kind node image records its Kubernetes
// version (kind build node-image writes it; so does skewtest's offline
// image).
const kindVersionFile = "kind/version"

// parseImageRef checks the reference of an image: source. A tag or digest
// must be written: an implicit :latest would make the run depend on
// whatever was pushed last.
func parseImageRef(spec, value string) (name.Reference, error) {
	value = strings.TrimSpace(value)
	ref, err := name.ParseReference(value)
	if err != nil {
		return nil, fmt.Errorf("kubelet source %q: %q is not an image reference such as kindest/node:v1.36.3: %v", spec, value, err)
	}
	if _, isTag := ref.(name.Tag); isTag {
		last := value[strings.LastIndex(value, "/")+1:]
		if !strings.Contains(last, ":") {
			return nil, fmt.Errorf("kubelet source %q: give the image's tag or digest, e.g. image:%s:v1.36.3", spec, value)
		}
	}
	return ref, nil
}

// resolveImage extracts /usr/bin/<component> from a container image, such
// as the kindest/node image of a version, pulled from its registry. Only
// the layers needed are read, newest first (a kind node image's binaries
// are in its top layer); layer and manifest digests are verified as they
// are read. The result is cached by the image's digest, so a reference
// pinned by digest is served from the cache without the network.
func (r *Resolver) resolveImage(ctx context.Context, component, value string) (Binary, error) {
	ref, err := parseImageRef("image:"+value, value)
	if err != nil {
		return Binary{}, err
	}
	platform := v1.Platform{OS: "linux", Architecture: r.arch()}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithPlatform(platform), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	if r.HTTPClient != nil && r.HTTPClient.Transport != nil {
		opts = append(opts, remote.WithTransport(r.HTTPClient.Transport))
	}
	imageDir := filepath.Join(r.cacheDir(), KindImage)

	// A digest names the content: look in the cache before asking the
	// registry. A tag may have moved, so it is always resolved.
	digest := ""
	if d, ok := ref.(name.Digest); ok {
		digest = d.DigestStr()
	} else {
		desc, err := remote.Head(ref, opts...)
		if err != nil {
			return Binary{}, imageError(ref, err)
		}
		digest = desc.Digest.String()
	}
	dir := filepath.Join(imageDir, strings.ReplaceAll(digest, ":", "-"), r.arch())
	dest := filepath.Join(dir, component)
	source := fmt.Sprintf("image:%s@%s", ref.Context().Name(), digest)
	if b, err := cachedBinary(dest); err == nil {
		if v, err := os.ReadFile(filepath.Join(dir, component+".version")); err == nil {
			b.Version, b.Source = strings.TrimSpace(string(v)), source
			r.logger().Debug("using cached binary", "path", dest, "image", ref.String())
			return b, nil
		}
	}

	start := time.Now()
	r.logger().Info("reading image", "image", ref.String(), "digest", digest, "platform", platform.String(), "file", "/usr/bin/"+component)
	img, err := remote.Image(ref, opts...)
	if err != nil {
		return Binary{}, imageError(ref, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Binary{}, err
	}
	installed := false
	defer func() {
		if !installed {
			os.Remove(dest)
			os.Remove(dest + ".sha256")
			removeEmptyDirs(dir, imageDir)
		}
	}()
	kindVersion, err := extractFromImage(img, "usr/bin/"+component, dest, r.logger(), ref.String())
	if err != nil {
		return Binary{}, fmt.Errorf("extract /usr/bin/%s from %s: %w", component, ref, err)
	}
	b, err := recordBinary(dest)
	if err != nil {
		return Binary{}, err
	}
	b.Version, err = r.imageBinaryVersion(ctx, ref, dest, kindVersion)
	if err != nil {
		return Binary{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, component+".version"), []byte(b.Version+"\n"), 0o644); err != nil {
		return Binary{}, err
	}
	installed = true
	b.Source = source
	r.logger().Info("extracted", "component", component, "version", b.Version, "image", ref.String(), "took", time.Since(start).Round(time.Millisecond))
	return b, nil
}

// imageBinaryVersion is the version the image records in /kind/version,
// checked against the binary's own --version where it can run here; an
// image that is not a kind node image needs a runnable binary.
func (r *Resolver) imageBinaryVersion(ctx context.Context, ref name.Reference, bin, kindVersion string) (string, error) {
	recorded := ""
	if kindVersion != "" {
		v, _, ok := parseKubeVersion(strings.TrimSpace(kindVersion))
		if !ok {
			return "", fmt.Errorf("%s: /%s says %q, not a Kubernetes version", ref, kindVersionFile, strings.TrimSpace(kindVersion))
		}
		recorded = v
	}
	if r.arch() != runtime.GOARCH {
		if recorded == "" {
			return "", fmt.Errorf("%s has no /%s and its %s kubelet cannot run on this %s machine to tell its version", ref, kindVersionFile, r.arch(), runtime.GOARCH)
		}
		return recorded, nil
	}
	v, err := r.binaryVersion(ctx, bin)
	if err != nil {
		return "", err
	}
	if recorded != "" && recorded != v {
		return "", badSource("%s: /%s says %s but its kubelet reports %s; the image is inconsistent, use another", ref, kindVersionFile, recorded, v)
	}
	return v, nil
}

// imageError says what to do about a registry failure.
func imageError(ref name.Reference, err error) error {
	var terr *transport.Error
	if errors.As(err, &terr) {
		switch terr.StatusCode {
		case http.StatusNotFound:
			return badSource("image %s not found in %s: check the tag (kindest/node tags are listed in the kind release notes) or use module:/release: instead: %w", ref, ref.Context().RegistryStr(), err)
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("image %s: the registry %s refused access; log in with docker login: %w", ref, ref.Context().RegistryStr(), err)
		}
	}
	return fmt.Errorf("image %s: cannot read it from %s (offline? use module:vX.Y.Z or KUBELET_SOURCE=module, which build from the Go module): %w", ref, ref.Context().RegistryStr(), err)
}

// extractFromImage writes the file at want (a path without the leading
// slash) of img's flattened file system to dest and returns the content of
// /kind/version if the image has one. Layers are read from the top down,
// honouring whiteouts, and the search stops as soon as both files are
// settled.
func extractFromImage(img v1.Image, want, dest string, logger *slog.Logger, what string) (kindVersion string, err error) {
	layers, err := img.Layers()
	if err != nil {
		return "", err
	}
	targets := map[string]*target{want: {}, kindVersionFile: {}}
	for i := len(layers) - 1; i >= 0 && (targets[want].pending() || targets[kindVersionFile].pending()); i-- {
		if err := scanLayer(layers[i], targets, func(name string, r io.Reader, mode fs.FileMode) error {
			if name == kindVersionFile {
				b, err := io.ReadAll(io.LimitReader(r, 256))
				kindVersion = string(b)
				return err
			}
			return writeExecutable(dest, r)
		}, &progressLogger{logger: logger, url: fmt.Sprintf("%s layer %d of %d", what, i+1, len(layers)), last: time.Now()}); err != nil {
			return "", fmt.Errorf("layer %d of %d: %w", i+1, len(layers), err)
		}
	}
	if t := targets[want]; !t.found {
		if t.deleted {
			return "", fmt.Errorf("/%s is deleted in the image", want)
		}
		return "", badSource("the image has no /%s; is it a kind node image (kindest/node)?", want)
	}
	return kindVersion, nil
}

// target is the state of one wanted path while layers are read top down.
type target struct{ found, deleted bool }

func (t *target) pending() bool { return !t.found && !t.deleted }

// scanLayer reads one layer's tar and hands each still-pending target
// found as a regular file to take. A whiteout of the target, or an opaque
// whiteout of a directory above it, settles it as deleted for the layers
// below; the layer's own entries still count (the OCI image spec's rules).
func scanLayer(l v1.Layer, targets map[string]*target, take func(string, io.Reader, fs.FileMode) error, progress io.Writer) error {
	rc, err := l.Uncompressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	tr := tar.NewReader(io.TeeReader(rc, progress))
	hiddenBelow := map[string]bool{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		p := strings.TrimPrefix(path.Clean("/"+hdr.Name), "/")
		dir, base := path.Split(p)
		dir = strings.TrimSuffix(dir, "/")
		if base == ".wh..wh..opq" {
			for name, t := range targets {
				if t.pending() && (dir == "" || strings.HasPrefix(name, dir+"/")) {
					hiddenBelow[name] = true
				}
			}
			continue
		}
		if deleted, ok := strings.CutPrefix(base, ".wh."); ok {
			full := path.Join(dir, deleted)
			for name, t := range targets {
				if t.pending() && (name == full || strings.HasPrefix(name, full+"/")) {
					hiddenBelow[name] = true
				}
			}
			continue
		}
		t, ok := targets[p]
		if !ok || !t.pending() {
			continue
		}
		switch hdr.Typeflag {
		case tar.TypeReg:
			if err := take(p, tr, hdr.FileInfo().Mode()); err != nil {
				return fmt.Errorf("read /%s: %w", p, err)
			}
			t.found = true
		case tar.TypeSymlink, tar.TypeLink:
			return fmt.Errorf("/%s is a link to %s; give the file itself (file:) instead", p, hdr.Linkname)
		default:
			return fmt.Errorf("/%s is not a regular file (tar type %q)", p, hdr.Typeflag)
		}
	}
	for name := range hiddenBelow {
		if t := targets[name]; t.pending() {
			t.deleted = true
		}
	}
	// Drain the rest so the layer's digest is verified in full.
	_, err = io.Copy(io.Discard, rc)
	return err
}

// writeExecutable writes r to dest through a temporary file, so dest is
// either complete or absent.
func writeExecutable(dest string, r io.Reader) error {
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".extract-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, r); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o755); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dest)
}
