package systemdkubelet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"sigs.k8s.io/skewtest/clusters/binaries"
	"sigs.k8s.io/skewtest/clusters/exec"
)

// File is new content for one of Layout.Files (the EnvironmentFile with the
// kubelet's flags, or its config), for a version that would reject the
// node's own.
type File struct {
	Path    string
	Content []byte
}

// swapIn renames the upload $1 over $2, keeping the node's own $2 first,
// once, as $2.skewtest-orig. Keeping is a rename, never a copy: the kept
// original is the same file (inode, extended attributes such as an IMA
// signature, hard links, owner, times), and Restore renames it back. A
// symlink stays a symlink. A later swap finds the original kept and
// renames over the previous upload; a swap killed between the two renames
// leaves $2 missing and the original kept, which Restore puts back.
const swapIn = `o="$2` + OrigSuffix + `"
if ! { [ -e "$o" ] || [ -L "$o" ]; } && { [ -e "$2" ] || [ -L "$2" ]; }; then
mv -- "$2" "$o" || exit
fi
mv -f -- "$1" "$2"`

// Swap installs bin as the unit's kubelet, with files (if any) replacing
// Layout's environment or config file; the kubelet must be stopped. The
// binary is streamed to Binary+NewSuffix, checked by sha256 on the node
// (against bin.SHA256 when set), made executable, and renamed over Binary
// (one rename: the unit never sees half a binary); the node's own binary
// and files are first renamed aside, once, to <path>+OrigSuffix for
// Restore, and before the first swap the kubelet's checkpoint files are
// kept in Layout.StateDir (keepState), since bin rewrites them in a format
// the node's own kubelet may refuse; finally Binary's sha256 is read again
// on the node. Nothing else of the unit changes, so bin must accept the
// node's flags and config unless files replace them.
func (d *Driver) Swap(ctx context.Context, bin binaries.Binary, files ...File) error {
	what := bin.Path
	if bin.Version != "" {
		what = bin.Version + " (" + bin.Path + ")"
	}
	wrap := func(err error) error { return fmt.Errorf("swap kubelet on %s to %s: %w", d, what, err) }
	for _, f := range files {
		if !slices.Contains(d.Layout.Files(), f.Path) {
			return wrap(fmt.Errorf("%s is not the layout's environment file or config (%s)", f.Path, strings.Join(d.Layout.Files(), ", ")))
		}
	}
	target := d.Layout.Binary
	newPath := target + NewSuffix

	f, err := os.Open(bin.Path)
	if err != nil {
		return wrap(err)
	}
	defer f.Close()
	sum, err := d.upload(ctx, f, newPath)
	removeNew := func() { _, _ = d.run(context.WithoutCancel(ctx), "rm", "-f", newPath) }
	if err != nil {
		removeNew()
		return wrap(err)
	}
	if bin.SHA256 != "" && !strings.EqualFold(bin.SHA256, sum) {
		removeNew()
		return wrap(fmt.Errorf("local file %s has sha256 %s, want %s", bin.Path, sum, bin.SHA256))
	}
	if _, err := d.run(ctx, "chmod", "0755", newPath); err != nil {
		removeNew()
		return wrap(err)
	}
	if err := d.keepState(ctx); err != nil {
		removeNew()
		return wrap(err)
	}
	if _, err := d.sh(ctx, swapIn, newPath, target); err != nil {
		removeNew()
		return wrap(fmt.Errorf("rename %s over %s, the node's own kept as %s: %w", newPath, target, target+OrigSuffix, err))
	}
	if got, err := d.sha256On(ctx, target); err != nil {
		return wrap(err)
	} else if got != sum {
		return wrap(fmt.Errorf("%s has sha256 %s after the rename, want %s", target, got, sum))
	}
	for _, file := range files {
		if err := d.replaceFile(ctx, file); err != nil {
			return wrap(err)
		}
	}
	d.log().Info("kubelet swapped", "node", d.String(), "binary", target, "version", bin.Version, "sha256", sum)
	return nil
}

// upload streams r to path on the node and returns its sha256 as checked
// there.
func (d *Driver) upload(ctx context.Context, r io.Reader, path string) (string, error) {
	h := sha256.New()
	if _, err := exec.OutputStdin(ctx, d.Node, io.TeeReader(r, h), "sh", "-c", `cat > "$1"`, "sh", path); err != nil {
		return "", fmt.Errorf("upload to %s: %w", path, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	got, err := d.sha256On(ctx, path)
	if err != nil {
		return "", err
	}
	if got != sum {
		return "", fmt.Errorf("uploaded %s has sha256 %s on the node, sent %s", path, got, sum)
	}
	return sum, nil
}

// replaceFile keeps the node's own file once and renames file's content
// over it. Only a file the node has is replaced: Restore puts back what it
// kept, and an absent file has nothing to keep.
func (d *Driver) replaceFile(ctx context.Context, file File) error {
	if _, err := d.run(ctx, "test", "-e", file.Path); err != nil {
		return fmt.Errorf("%s: the node has no such file to replace: %w", file.Path, err)
	}
	newPath := file.Path + NewSuffix
	if _, err := d.upload(ctx, bytes.NewReader(file.Content), newPath); err != nil {
		_, _ = d.run(context.WithoutCancel(ctx), "rm", "-f", newPath)
		return err
	}
	// The new file gets the mode of the one it replaces (GNU chmod).
	if _, err := d.run(ctx, "chmod", "--reference="+file.Path, newPath); err != nil {
		_, _ = d.run(context.WithoutCancel(ctx), "rm", "-f", newPath)
		return err
	}
	if _, err := d.sh(ctx, swapIn, newPath, file.Path); err != nil {
		_, _ = d.run(context.WithoutCancel(ctx), "rm", "-f", newPath)
		return fmt.Errorf("rename %s over %s, the node's own kept as %s: %w", newPath, file.Path, file.Path+OrigSuffix, err)
	}
	return nil
}
