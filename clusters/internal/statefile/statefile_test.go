package statefile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteRead(t *testing.T) {
	dir := t.TempDir()
	type st struct{ RunID string }
	if err := Write(dir, "state.json", st{RunID: "a"}, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, "state.json", st{RunID: "b"}, 0o600); err != nil {
		t.Fatal(err)
	}
	var got st
	if err := Read(dir, "state.json", &got); err != nil || got.RunID != "b" {
		t.Errorf("Read = %+v, %v; want the second write", got, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "state.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	if _, err := os.Stat(filepath.Join(dir, "state.json.tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temporary file is left: %v", err)
	}
	if err := Read(t.TempDir(), "state.json", &got); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Read of a missing file = %v, want ErrNotExist", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Read(dir, "bad.json", &got); err == nil || !strings.Contains(err.Error(), "bad.json") {
		t.Errorf("Read of broken JSON = %v, want an error naming the file", err)
	}
}
