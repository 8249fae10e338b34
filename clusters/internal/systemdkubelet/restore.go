package systemdkubelet

import (
	"context"
	"fmt"
	"strings"
)

// putBack renames each $N.skewtest-orig over $N and prints the paths it
// put back, one a line.
const putBack = `for f; do
if [ -e "$f` + OrigSuffix + `" ] || [ -L "$f` + OrigSuffix + `" ]; then mv -f "$f` + OrigSuffix + `" "$f" && echo "$f"; fi
done`

// Restore puts the node's own kubelet back and returns once it runs and
// answers its health endpoint: it stops the unit, renames the binary (and
// any environment or config file) that the first Swap kept over the
// swapped ones, checks the binary's sha256 against want (the Original
// recorded before the first swap; empty skips the check), and starts the
// unit. On a node with nothing kept (never swapped, or already restored)
// it only makes sure the unit runs: a run killed between Stop and Swap
// leaves it stopped. It is safe to call more than once.
func (d *Driver) Restore(ctx context.Context, want string) error {
	wrap := func(err error) error { return fmt.Errorf("restore kubelet on %s: %w", d, err) }
	paths := append([]string{d.Layout.Binary}, d.Layout.Files()...)
	kept, err := d.sh(ctx, `for f; do if [ -e "$f`+OrigSuffix+`" ] || [ -L "$f`+OrigSuffix+`" ]; then echo "$f"; fi; done`, paths...)
	if err != nil {
		return wrap(err)
	}
	if strings.TrimSpace(kept.Stdout) != "" {
		if err := d.Stop(ctx); err != nil {
			return wrap(err)
		}
		res, err := d.sh(ctx, putBack, paths...)
		if err != nil {
			return wrap(err)
		}
		d.log().Info("kubelet files put back", "node", d.String(), "files", strings.Fields(res.Stdout))
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
	return nil
}
