package systemdkubelet

import (
	"context"
	"fmt"
	"strings"
)

// Original is the node's own kubelet binary: what Restore puts back.
type Original struct {
	// Binary is Layout.Binary.
	Binary string
	// SHA256 is the original binary's sha256 on the node.
	SHA256 string
	// Kept says an earlier swap already kept it as Binary+OrigSuffix (a
	// run that was killed and not cleaned); the sha256 is that copy's.
	Kept bool
}

// Original reads what Restore would put back: Binary+OrigSuffix when an
// earlier swap kept it, else Binary itself. Call it before the first Swap
// and record the result where a later `skewtest clean` can find it.
func (d *Driver) Original(ctx context.Context) (Original, error) {
	bin := d.Layout.Binary
	const which = `if [ -e "$1` + OrigSuffix + `" ]; then echo kept; sha256sum "$1` + OrigSuffix + `"; else echo live; sha256sum "$1"; fi`
	res, err := d.sh(ctx, which, bin)
	if err != nil {
		return Original{}, fmt.Errorf("read the kubelet binary %s on %s: %w", bin, d, err)
	}
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if len(lines) != 2 {
		return Original{}, fmt.Errorf("read the kubelet binary %s on %s: unexpected output %q", bin, d, res.Stdout)
	}
	sum, _, _ := strings.Cut(lines[1], " ")
	if len(sum) != 64 {
		return Original{}, fmt.Errorf("read the kubelet binary %s on %s: sha256sum printed %q", bin, d, lines[1])
	}
	return Original{Binary: bin, SHA256: strings.ToLower(sum), Kept: lines[0] == "kept"}, nil
}
