// Package statefile keeps a provider's run state as one JSON file in its
// run directory, written before the thing it describes is made, so that
// `skewtest clean` can undo a killed run. Every provider writes it the same
// way: the whole file replaced in one rename, after fsync, so a kill
// leaves the old state or the new, never half of one.
package statefile

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Write replaces dir/name with v as indented JSON, readable by perm.
func Write(dir, name string, v any, perm os.FileMode) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, name+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}

// Read decodes dir/name into v. A missing file's error satisfies
// errors.Is(err, os.ErrNotExist); a file that is not v's JSON is named.
func Read(dir, name string, v any) error {
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
