package systemdkubelet

import (
	"context"
	"fmt"
)

// Start starts the unit and returns once the kubelet answers its health
// endpoint on the node. It clears a failed state first, so a unit that hit
// its start limit in an earlier hop can start again. A kubelet that exits
// instead (a flag, config field or feature gate its version rejects) is
// caught by the unit going failed or by systemd's restart count rising
// under Restart=always, not by waiting out the timeout; the error carries
// the unit's last journal lines.
func (d *Driver) Start(ctx context.Context) error {
	if _, err := d.run(ctx, "systemctl", "reset-failed", d.Layout.Unit); err != nil {
		// A unit that is not failed is fine; only a systemctl that cannot
		// talk to systemd is an error, and start reports it below.
		d.log().Debug("reset-failed", "node", d.String(), "err", err)
	}
	before, err := d.State(ctx)
	if err != nil {
		return fmt.Errorf("start kubelet on %s: %w", d, err)
	}
	if _, err := d.run(ctx, "systemctl", "start", d.Layout.Unit); err != nil {
		return fmt.Errorf("start kubelet on %s: %w; last log lines:\n%s", d, err, d.Journal(ctx, journalLines))
	}
	// systemd may flush the restart count when the unit is started by
	// hand, so the baseline follows it down.
	baseline := before.NRestarts
	err = d.waitUnit(ctx, "running and healthy", func(ctx context.Context, s UnitState) (bool, error) {
		baseline = min(baseline, s.NRestarts)
		switch {
		case s.NRestarts > baseline:
			return false, fmt.Errorf("%w: the kubelet exited and systemd restarted it %d times", errGaveUp, s.NRestarts-baseline)
		case s.ActiveState == "failed" || s.ActiveState == "inactive":
			return false, fmt.Errorf("%w: the kubelet exited", errGaveUp)
		case s.ActiveState != "active" || s.MainPID == 0:
			return false, nil
		}
		return d.healthy(ctx)
	})
	if err != nil {
		return fmt.Errorf("start kubelet on %s: %w", d, err)
	}
	d.log().Info("kubelet started", "node", d.String(), "unit", d.Layout.Unit)
	return nil
}
