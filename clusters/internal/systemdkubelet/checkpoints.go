package systemdkubelet

import (
	"context"
	"fmt"
	"path/filepath"

	"sigs.k8s.io/skewtest/clusters/nodes"
)

// StateSuffix names the directory beside Layout.RootDir where keepState
// keeps the node's own kubelet's checkpoint files, as they were before the
// first swap, for Restore.
const StateSuffix = ".skewtest-state"

// StateDir is where keepState keeps the checkpoint files:
// RootDir+StateSuffix, beside the root (on its file system, so putting
// them back is a rename) and out of the kubelet's sight.
func (l Layout) StateDir() string { return filepath.Clean(l.RootDir) + StateSuffix }

// Checkpoints are the node's checkpoint files (nodes.KubeletCheckpoints
// under RootDir).
func (l Layout) Checkpoints() []string {
	out := make([]string, len(nodes.KubeletCheckpoints))
	for i, f := range nodes.KubeletCheckpoints {
		out[i] = filepath.Join(l.RootDir, f)
	}
	return out
}

// keepState copies each of $2... that exists into $1/files/<its path>, and
// lists every one in $1/paths, present or not, so that Restore knows which
// to remove: one the node's kubelet did not have is the run's. It is made
// under a temporary name and renamed into place, so a kill never leaves
// half a copy taken for the original, and only once: a directory already
// there is an earlier swap's, of the node's own files. cp -a keeps mode,
// owner and extended attributes. Prints each file kept.
const keepState = `s="$1"; shift
if [ -d "$s" ]; then exit 0; fi
rm -rf -- "$s.tmp" && mkdir -m 0700 -- "$s.tmp" && : > "$s.tmp/paths" || exit
for f; do
printf '%s\n' "$f" >> "$s.tmp/paths" || exit
if [ -e "$f" ] || [ -L "$f" ]; then mkdir -p -- "$s.tmp/files${f%/*}" && cp -a -- "$f" "$s.tmp/files$f" && echo "$f" || exit; fi
done
mv -- "$s.tmp" "$s"`

// putBackState renames each file of $1/paths that keepState kept back over
// what the run's kubelets wrote, removes each it lists that the node's
// kubelet did not have, then removes $1. A $1.tmp is a keep cut short
// before the first swap, when nothing was rewritten yet: it is removed.
// Prints "put back PATH" or "removed PATH" for each change; nothing when
// there is no $1.
const putBackState = `s="$1"
rm -rf -- "$s.tmp" || exit
if [ ! -d "$s" ]; then exit 0; fi
if [ -f "$s/paths" ]; then
while IFS= read -r f; do
case "$f" in /*) ;; *) continue ;; esac
if [ -e "$s/files$f" ] || [ -L "$s/files$f" ]; then mv -f -- "$s/files$f" "$f" && echo "put back $f" || exit
elif [ -e "$f" ] || [ -L "$f" ]; then rm -f -- "$f" && echo "removed $f" || exit
fi
done < "$s/paths"
fi
rm -rf -- "$s"`

// keepState keeps the node's own kubelet's checkpoint files (Checkpoints)
// in StateDir, once, before the first swap: a kubelet of another version
// rewrites them in its format, which the node's own may refuse at its
// next start. The kubelet must be stopped. Restore puts them back.
func (d *Driver) keepState(ctx context.Context) error {
	res, err := d.sh(ctx, keepState, append([]string{d.Layout.StateDir()}, d.Layout.Checkpoints()...)...)
	if err != nil {
		return fmt.Errorf("keep the kubelet's checkpoint files on %s in %s: %w", d, d.Layout.StateDir(), err)
	}
	if kept := lines(res.Stdout); len(kept) > 0 {
		d.log().Info("kept the kubelet's checkpoint files", "node", d.String(), "dir", d.Layout.StateDir(), "files", kept)
	}
	return nil
}

// putBackState puts the checkpoint files keepState kept back, and removes
// those the node's own kubelet did not have; the kubelet must be stopped.
// It returns the changes, one a line ("put back PATH", "removed PATH").
func (d *Driver) putBackState(ctx context.Context) ([]string, error) {
	res, err := d.sh(ctx, putBackState, d.Layout.StateDir())
	if err != nil {
		return nil, fmt.Errorf("put back the kubelet's checkpoint files from %s: %w", d.Layout.StateDir(), err)
	}
	return lines(res.Stdout), nil
}
