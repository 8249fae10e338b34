package nodeimage

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/internal/images"
)

// KindCNIImage is the image of the CNI stand-in (cmd/kindcni) that
// /kind/manifests/default-cni.yaml runs; localhost/ so that nothing ever
// tries a registry for it.
const KindCNIImage = "localhost/skewtest/kind-cni:v1"

// imagePath is the PATH of every image made here: kubeadm's static pods
// run their components by command name (kube-apiserver, etcd, ...).
const imagePath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// kubeProxyPackages are the Debian packages (with their dependencies) whose
// files the kube-proxy image carries from the node rootfs: kube-proxy runs
// iptables (or nft) userspace. The rootfs's alternatives come along, so
// iptables is Debian's default, iptables-nft.
var kubeProxyPackages = []string{"iptables", "nftables", "conntrack"}

type imageBinaries struct {
	kube                 map[string]binaries.Binary
	etcd, pause, kindcni string
}

// layerEntry is one entry of an image layer.
type layerEntry struct {
	Name string // relative path, no leading slash
	Type byte   // tar.TypeDir, tar.TypeReg or tar.TypeSymlink
	Mode int64
	Src  string // host file, for TypeReg
	Link string // for TypeSymlink
}

// imageSpec is one image to make.
type imageSpec struct {
	Ref        string
	Entrypoint []string
	Layers     [][]layerEntry
}

// binaryLayer is a layer holding one executable at p, plus /tmp.
func binaryLayer(p, src string) []layerEntry {
	entries := []layerEntry{{Name: "tmp", Type: tar.TypeDir, Mode: 0o1777}}
	for d := path.Dir(p); d != "/" && d != "."; d = path.Dir(d) {
		entries = append(entries, layerEntry{Name: d[1:], Type: tar.TypeDir, Mode: 0o755})
	}
	entries = append(entries, layerEntry{Name: p[1:], Type: tar.TypeReg, Mode: 0o755, Src: src})
	sortEntries(entries)
	return entries
}

// imageSpecs lists the images to make for kubeadm's image list (in
// `required`) plus the CNI stand-in. Each Kubernetes component and etcd
// is at /usr/local/bin (kubeadm's manifests run them by name or, for
// kube-proxy, as /usr/local/bin/kube-proxy); pause is /pause-style
// (podbin pause), as in the upstream images. CoreDNS, on kubeadm's list,
// is left out: no cluster of skewtest's runs its addon.
func imageSpecs(set kubeadmImageSet, bins imageBinaries, proxyUserspace []layerEntry) []imageSpec {
	kubeImage := func(ref imageRef, extra ...[]layerEntry) imageSpec {
		p := "/usr/local/bin/" + ref.Name
		return imageSpec{Ref: ref.Ref, Entrypoint: []string{p}, Layers: append(extra, binaryLayer(p, bins.kube[ref.Name].Path))}
	}
	var proxyLayers [][]layerEntry
	if len(proxyUserspace) > 0 {
		proxyLayers = append(proxyLayers, proxyUserspace)
	}
	return []imageSpec{
		kubeImage(set.APIServer),
		kubeImage(set.ControllerManager),
		kubeImage(set.Scheduler),
		kubeImage(set.Proxy, proxyLayers...),
		{Ref: set.Etcd.Ref, Entrypoint: []string{"/usr/local/bin/etcd"}, Layers: [][]layerEntry{binaryLayer("/usr/local/bin/etcd", bins.etcd)}},
		{Ref: set.Pause.Ref, Entrypoint: []string{"/podbin", "pause"}, Layers: [][]layerEntry{binaryLayer("/podbin", bins.pause)}},
		{Ref: KindCNIImage, Entrypoint: []string{"/kindcni"}, Layers: [][]layerEntry{binaryLayer("/kindcni", bins.kindcni)}},
	}
}

// writeImages writes every image as one docker-archive tarball (what `ctr
// images import` and `kind load image-archive` take) and returns their
// names.
func writeImages(out, rootfs string, required []string, bins imageBinaries) ([]string, error) {
	set, err := parseKubeadmImages(required)
	if err != nil {
		return nil, err
	}
	proxyUserspace, err := dpkgLayer(rootfs, kubeProxyPackages)
	if err != nil {
		return nil, fmt.Errorf("kube-proxy's iptables userspace: %w", err)
	}
	refs := map[name.Reference]v1.Image{}
	var names []string
	for _, s := range imageSpecs(set, bins, proxyUserspace) {
		img, err := makeImage(s)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", s.Ref, err)
		}
		tag, err := name.NewTag(s.Ref)
		if err != nil {
			return nil, err
		}
		refs[tag] = img
		names = append(names, s.Ref)
	}
	f, err := os.Create(out)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := tarball.MultiRefWrite(refs, f); err != nil {
		return nil, fmt.Errorf("write image tarball %s: %w", out, err)
	}
	return names, f.Close()
}

func makeImage(s imageSpec) (v1.Image, error) {
	var layers []v1.Layer
	for _, entries := range s.Layers {
		entries := entries
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			pr, pw := io.Pipe()
			go func() { pw.CloseWithError(writeLayerTar(pw, entries)) }()
			return pr, nil
		}, tarball.WithCompressionLevel(gzip.BestSpeed))
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	}
	return images.FromLayers(layers, func(c *v1.Config) {
		c.Entrypoint = s.Entrypoint
		c.Env = []string{imagePath}
		c.WorkingDir = "/"
		c.Labels = map[string]string{"io.skewtest.image": "kind node image build"}
	})
}

// writeLayerTar writes entries as a tar, owned by root with a fixed time so
// that rebuilding gives the same digests.
func writeLayerTar(w io.Writer, entries []layerEntry) error {
	tw := tar.NewWriter(w)
	epoch := time.Unix(0, 0)
	for _, e := range entries {
		h := &tar.Header{Name: e.Name, Typeflag: e.Type, Mode: e.Mode, ModTime: epoch, Format: tar.FormatPAX}
		switch e.Type {
		case tar.TypeDir:
			h.Name += "/"
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
		case tar.TypeSymlink:
			h.Linkname = e.Link
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
		case tar.TypeReg:
			f, err := os.Open(e.Src)
			if err != nil {
				return err
			}
			st, err := f.Stat()
			if err != nil {
				f.Close()
				return err
			}
			h.Size = st.Size()
			if err := tw.WriteHeader(h); err != nil {
				f.Close()
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("layer entry %s: unsupported type %q", e.Name, e.Type)
		}
	}
	return tw.Close()
}

func sortEntries(entries []layerEntry) {
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
}
