// Package filetest holds the file helpers that the tests of the kubelet
// drivers share: writing a file with an exact mode, and asserting a file's
// content and mode or its absence. It is imported by _test.go files only.
package filetest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Write writes content to path with exactly mode (os.WriteFile applies the
// umask and keeps an existing file's mode), making the parent directories.
func Write(t testing.TB, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// AssertContent reports an error unless path holds content with mode.
// Contents are quoted up to 40 bytes: they are often binaries.
func AssertContent(t testing.TB, path, content string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Error(err)
		return
	}
	if string(b) != content {
		t.Errorf("%s holds %.40q..., want %.40q...", path, b, content)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Error(err)
		return
	}
	if fi.Mode().Perm() != mode {
		t.Errorf("%s mode %v, want %v", path, fi.Mode().Perm(), mode)
	}
}

// AssertMissing reports an error unless nothing, not even a dangling
// link, is at path.
func AssertMissing(t testing.TB, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists (%v)", path, err)
	}
}
