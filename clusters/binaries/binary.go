// Package binaries resolves the Kubernetes binaries a run uses (the kubelet
// of every plan version, and the control plane for providers that create
// one), caches them under the skewtest cache and records where each came from
// and its sha256, for the report.
package binaries

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Binary is one resolved executable.
type Binary struct {
	Component string `json:"component"`
	Version   string `json:"version"`
	// Source says where it came from: "release:<url>", "module:v1.36.3",
	// "patch:<diff's file name>@v1.37.2",
	// "file:/path", "checkout:/path", "image:<repository>@<digest>".
	Source string `json:"source"`
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	// BuildTags are the Go build tags a module build used, comma-separated
	// as `go build -tags` takes them (recorded in the binary's
	// <path>.build.json sidecar); empty for a plain build and for every
	// other source. A string, not a slice, so that Binary stays comparable.
	//
	// The one tag used is "providerless", and only for a component that
	// would otherwise import a staging module the Go module proxy does not
	// serve from files the tag leaves out (k8s.io/legacy-cloud-providers,
	// imported by the in-tree cloud providers: measured, kube-apiserver and
	// kube-controller-manager v1.27.16 and kube-apiserver v1.29.6). It does
	// not change volume reconstruction: it drops the in-tree cloud
	// providers, the kubelet's cloud hooks (cadvisor's cloud info, the Azure
	// registry credential provider, the cloud credential flags) and the
	// in-tree volume plugins kept for CSI migration (AWS EBS, Azure Disk
	// and File, GCE PD, vSphere, Portworx, RBD; which ones depends on the
	// version), none of which skewtest's CSI and local volumes use. The
	// volume manager, its reconciler and reconstruction code, the
	// operation executor and the CSI, local, configmap, secret, projected,
	// downwardAPI, emptyDir and hostPath plugins are the same packages with
	// the same files with or without it (checked with go/build for
	// v1.26.15 to v1.33.13: TestProxyBuildability fails if one differs).
	BuildTags string `json:"buildTags,omitempty"`
	// PatchSHA256 is the hex sha256 of the diff a patch: build applied
	// (that of an empty file for an empty patch); empty for every other
	// source.
	PatchSHA256 string `json:"patchSHA256,omitempty"`
	// PatchFiles are the files of k8s.io/kubernetes that diff changed,
	// creates or removes, comma-separated and sorted (a string, as
	// BuildTags is); empty for an empty patch and every other source.
	PatchFiles string `json:"patchFiles,omitempty"`
}

// DefaultCacheDir is $SKEWTEST_CACHE, else $XDG_CACHE_HOME/skewtest, else
// $HOME/.cache/skewtest. It is never inside the repository.
func DefaultCacheDir() string {
	if d := os.Getenv("SKEWTEST_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "skewtest")
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		home = os.TempDir()
	}
	return filepath.Join(home, ".cache", "skewtest")
}

// FileSHA256 returns the hex sha256 of a file.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// recordBinary hashes path and writes path.sha256 beside it, so later runs
// can tell a complete cached binary from a damaged one.
func recordBinary(path string) (Binary, error) {
	sum, err := FileSHA256(path)
	if err != nil {
		return Binary{}, err
	}
	if err := os.WriteFile(path+".sha256", []byte(sum+"\n"), 0o644); err != nil {
		return Binary{}, err
	}
	return Binary{Path: path, SHA256: sum}, nil
}

// Cached is the one check every cache of built or downloaded programs
// uses: the binary at path, if it exists and matches the sha256 recorded
// beside it (path.sha256) when it was made. A binary without a record, or
// one that changed since, is not trusted: the caller makes it again.
func Cached(path string) (Binary, error) { return cachedBinary(path) }

// Record writes path's sha256 beside it (path.sha256), after the binary
// is in place, so that Cached trusts it from then on.
func Record(path string) (Binary, error) { return recordBinary(path) }

// cachedBinary returns a cached binary if it exists and matches its recorded
// sha256.
func cachedBinary(path string) (Binary, error) {
	want, err := os.ReadFile(path + ".sha256")
	if err != nil {
		return Binary{}, err
	}
	got, err := FileSHA256(path)
	if err != nil {
		return Binary{}, err
	}
	if strings.TrimSpace(string(want)) != got {
		return Binary{}, fmt.Errorf("cached %s does not match its recorded sha256", path)
	}
	return Binary{Path: path, SHA256: got}, nil
}
