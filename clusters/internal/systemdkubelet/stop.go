package systemdkubelet

import (
	"context"
	"fmt"
)

// Stop stops the unit and returns once systemd reports it inactive (or
// failed) with no main process left: the kubelet has exited. Its pods,
// mounts and other processes stay as they are. A stopped unit is not
// restarted by Restart=always, which only acts on exits systemd did not
// ask for.
func (d *Driver) Stop(ctx context.Context) error {
	if _, err := d.run(ctx, "systemctl", "stop", d.Layout.Unit); err != nil {
		return fmt.Errorf("stop kubelet on %s: %w", d, err)
	}
	err := d.waitUnit(ctx, "stopped", func(_ context.Context, s UnitState) (bool, error) {
		return (s.ActiveState == "inactive" || s.ActiveState == "failed") && s.MainPID == 0, nil
	})
	if err != nil {
		return fmt.Errorf("stop kubelet on %s: %w", d, err)
	}
	d.log().Info("kubelet stopped", "node", d.String(), "unit", d.Layout.Unit)
	return nil
}
