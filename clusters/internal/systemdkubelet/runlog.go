package systemdkubelet

import (
	"context"
	"fmt"
)

// runLogScript prints the log of a unit's current (or last) invocation
// only: journalctl filtered on the unit's InvocationID, which systemd renews
// at every start, so a restarted kubelet's lines are not mixed with its
// predecessor's. -o cat: klog's own header already carries the time.
const runLogScript = `id=$(systemctl show -p InvocationID --value "$1") && [ -n "$id" ] && exec journalctl --no-pager -o cat _SYSTEMD_INVOCATION_ID="$id"`

// RunLog is the kubelet's log since its unit last started, for checks that
// cross-check a kubelet metric against what the kubelet logged.
func (d *Driver) RunLog(ctx context.Context) (string, error) {
	res, err := d.sh(ctx, runLogScript, d.Layout.Unit)
	if err != nil {
		return "", fmt.Errorf("kubelet log of %s: %w", d, err)
	}
	return res.Stdout, nil
}
