package nodeimage

import (
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// resolveIn returns the host path of p (an absolute path inside the root
// file system at root), following symlinks as the rootfs would: an
// absolute link target is taken relative to root, and ".." never leaves
// root. With followLast false the last component is not followed (lstat
// semantics). Missing components are fine: they are kept as they are.
func resolveIn(root, p string, followLast bool) (string, error) {
	parts := strings.Split(strings.Trim(path.Clean("/"+p), "/"), "/")
	if len(parts) == 1 && parts[0] == "" {
		return root, nil
	}
	resolved := "/" // inside root
	hops := 0
	for len(parts) > 0 {
		part := parts[0]
		parts = parts[1:]
		switch part {
		case "", ".":
			continue
		case "..":
			resolved = path.Dir(resolved)
			continue
		}
		next := path.Join(resolved, part)
		if len(parts) == 0 && !followLast {
			resolved = next
			break
		}
		fi, err := os.Lstat(filepath.Join(root, next))
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			resolved = next
			continue
		}
		if hops++; hops > 40 {
			return "", fmt.Errorf("too many symlinks resolving %s in %s", p, root)
		}
		target, err := os.Readlink(filepath.Join(root, next))
		if err != nil {
			return "", err
		}
		if path.IsAbs(target) {
			resolved = "/"
		}
		rest := strings.Split(strings.Trim(target, "/"), "/")
		parts = append(rest, parts...)
	}
	return filepath.Join(root, resolved), nil
}

// writeFileIn writes data at p inside root with mode, making parent
// directories (0755) as needed.
func writeFileIn(root, p string, data []byte, mode os.FileMode) error {
	host, err := replaceIn(root, p)
	if err != nil {
		return err
	}
	if err := os.WriteFile(host, data, mode); err != nil {
		return err
	}
	return os.Chmod(host, mode)
}

// copyFileIn copies the host file src to p inside root with mode.
func copyFileIn(root, p, src string, mode os.FileMode) error {
	host, err := replaceIn(root, p)
	if err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(host, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(host, mode)
}

// symlinkIn makes p inside root a symlink to target, replacing what is
// there.
func symlinkIn(root, p, target string) error {
	host, err := replaceIn(root, p)
	if err != nil {
		return err
	}
	return os.Symlink(target, host)
}

// replaceIn resolves p inside root, makes its parent directories (0755)
// and removes what is at p, so that the caller creates it afresh rather
// than writing through an existing file or symlink.
func replaceIn(root, p string) (string, error) {
	host, err := resolveIn(root, p, false)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
		return "", err
	}
	if err := os.Remove(host); err != nil && !os.IsNotExist(err) {
		return "", err
	}
	return host, nil
}

// removeGlobIn removes whatever matches the glob pattern p inside root.
func removeGlobIn(root, p string) error {
	dir, err := resolveIn(root, path.Dir(p), true)
	if err != nil {
		return err
	}
	matches, err := filepath.Glob(filepath.Join(dir, path.Base(p)))
	if err != nil {
		return err
	}
	for _, m := range matches {
		if err := os.RemoveAll(m); err != nil {
			return err
		}
	}
	return nil
}

// mkdirIn makes the directory p inside root.
func mkdirIn(root, p string, mode os.FileMode) error {
	host, err := resolveIn(root, p, true)
	if err != nil {
		return err
	}
	return os.MkdirAll(host, mode)
}
