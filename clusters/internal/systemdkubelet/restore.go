package systemdkubelet

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// putBack renames each $N.skewtest-orig over $N and prints the paths it
// put back, one a line. A rename: the file back in place is the node's
// own, the same inode Swap renamed aside.
const putBack = `for f; do
if [ -e "$f` + OrigSuffix + `" ] || [ -L "$f` + OrigSuffix + `" ]; then mv -f -- "$f` + OrigSuffix + `" "$f" && echo "$f" || exit; fi
done`

// keptScript prints each of $2... that has a kept original, and $1 (the
// state directory) if it, or a keep of it cut short ($1.tmp), is there.
const keptScript = `s="$1"; shift
for f; do if [ -e "$f` + OrigSuffix + `" ] || [ -L "$f` + OrigSuffix + `" ]; then echo "$f"; fi; done
if [ -d "$s" ] || [ -e "$s.tmp" ]; then echo "$s"; fi`

// Restored is what Restore changed on the node.
type Restored struct {
	// Files are the binary and files renamed back.
	Files []string
	// State are the checkpoint files keepState kept and Restore put back
	// ("put back PATH"), or that the run's kubelets made and Restore
	// removed ("removed PATH").
	State []string
}

// Restore is RestoreReport without the report.
func (d *Driver) Restore(ctx context.Context, want string) error {
	_, err := d.RestoreReport(ctx, want)
	return err
}

// RestoreReport puts the node's own kubelet back and returns once it runs
// and answers its health endpoint: it stops the unit, renames the binary
// (and any environment or config file) that the first Swap renamed aside
// back over the swapped ones, puts back the checkpoint files keepState
// kept (removing those the node's kubelet did not have), checks the
// binary's sha256 against want (the Original recorded before the first
// swap; empty skips the check), and starts the unit. On a node with
// nothing kept (never swapped, or already restored) it only makes sure the
// unit runs: a run killed between Stop and Swap leaves it stopped. It is
// safe to call more than once.
func (d *Driver) RestoreReport(ctx context.Context, want string) (Restored, error) {
	var r Restored
	wrap := func(err error) (Restored, error) { return r, fmt.Errorf("restore kubelet on %s: %w", d, err) }
	paths := append([]string{d.Layout.Binary}, d.Layout.Files()...)
	kept, err := d.sh(ctx, keptScript, append([]string{d.Layout.StateDir()}, paths...)...)
	if err != nil {
		return wrap(err)
	}
	keptLines := lines(kept.Stdout)
	if len(keptLines) > 0 {
		if err := d.Stop(ctx); err != nil {
			return wrap(err)
		}
		res, err := d.sh(ctx, putBack, paths...)
		if err != nil {
			return wrap(err)
		}
		r.Files = lines(res.Stdout)
		d.log().Info("kubelet files put back", "node", d.String(), "files", r.Files)
		if slices.Contains(keptLines, d.Layout.StateDir()) {
			if r.State, err = d.putBackState(ctx); err != nil {
				return wrap(err)
			}
			d.log().Info("kubelet checkpoint files as the node had them", "node", d.String(), "changes", r.State)
		}
	}
	if want != "" {
		got, err := d.sha256On(ctx, d.Layout.Binary)
		if err != nil {
			return wrap(err)
		}
		if !strings.EqualFold(got, want) {
			return wrap(fmt.Errorf("%s has sha256 %s, but the node's own kubelet had %s; put it back by hand", d.Layout.Binary, got, want))
		}
	}
	if err := d.Start(ctx); err != nil {
		return wrap(err)
	}
	return r, nil
}
