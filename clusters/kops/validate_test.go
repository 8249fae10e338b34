package kops

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
)

// noAWS empties the environment the SDK's default chain reads, and PATH.
func noAWS(t *testing.T) {
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE"} {
		t.Setenv(v, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("PATH", t.TempDir())
}

// TestValidateNamesWhatIsMissing: with no AWS set-up at all, validation
// names the region, kops and the credentials at once, each with its fix.
func TestValidateNamesWhatIsMissing(t *testing.T) {
	noAWS(t)
	c := Config{RunID: "r", APIServerVersion: version.MustParseSemantic("v1.37.2")}
	err := c.Validate(context.Background())
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"PROVIDER=kops is not set up", "no AWS region: set AWS_REGION", "no kops: not found in PATH and KOPS is unset", "KOPS_VERSION",
		"no AWS credentials", "set AWS_PROFILE"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// TestValidateKopsVersionAgainstPlan: a kops two minors behind the plan's
// API server is refused; one behind is accepted (KOPS_RUN_TOO_NEW_VERSION).
func TestValidateKopsVersionAgainstPlan(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store := filepath.Join(dir, "world.json")
	kops, _ := writeFakeTools(t, dir, store) // answers version 1.36.0
	for _, tc := range []struct {
		api string
		ok  bool
	}{{"v1.37.2", true}, {"v1.36.3", true}, {"v1.38.0", false}} {
		c := Config{Kops: kops, APIServerVersion: version.MustParseSemantic(tc.api)}
		err := c.checkKops(context.Background())
		if (err == nil) != tc.ok {
			t.Errorf("kops 1.36.0 for API server %s: %v, want ok=%t", tc.api, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "kops 1.37 or newer is needed") {
			t.Errorf("error: %v", err)
		}
	}
	bad := Config{Kops: filepath.Join(dir, "missing"), APIServerVersion: version.MustParseSemantic("v1.37.2")}
	if err := bad.checkKops(context.Background()); err == nil || !strings.Contains(err.Error(), "KOPS="+bad.Kops+" is not an executable file") {
		t.Errorf("missing KOPS: %v", err)
	}
}

// TestDownloadKopsChecksSHA256: a binary whose sum differs from the
// published one is refused and nothing is kept; a matching one is cached.
func TestDownloadKopsChecksSHA256(t *testing.T) {
	t.Parallel()
	body := []byte("#!/bin/sh\necho 1.36.0\n")
	sum := sha256.Sum256(body)
	published := hex.EncodeToString(sum[:])
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := fmt.Sprintf("/v1.36.0/%s/%s/kops", runtime.GOOS, runtime.GOARCH)
		switch r.URL.Path {
		case path:
			w.Write(body)
		case path + ".sha256":
			fmt.Fprintln(w, published)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	log := slog.New(slog.DiscardHandler)
	cache := t.TempDir()
	good := published
	published = strings.Repeat("0", 64)
	if _, err := downloadKops(context.Background(), srv.URL, "v1.36.0", cache, log); err == nil || !strings.Contains(err.Error(), "refused, nothing kept") {
		t.Fatalf("mismatch: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(cache, "kops", "v1.36.0", "*")); len(left) > 0 {
		t.Fatalf("kept after a mismatch: %v", left)
	}
	published = good
	path, err := downloadKops(context.Background(), srv.URL, "1.36.0", cache, log)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("%s: %v %v", path, fi, err)
	}
	if _, err := downloadKops(context.Background(), srv.URL, "v1.37.0", cache, log); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("unpublished version: %v", err)
	}
}
