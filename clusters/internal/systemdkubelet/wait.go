package systemdkubelet

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"sigs.k8s.io/skewtest/clusters/exec"
)

// errGaveUp ends a wait early: the unit can no longer reach what the wait
// wants (it failed, or systemd restarted a crashed kubelet).
var errGaveUp = errors.New("gave up")

// waitUnit polls the unit's state until done says it is there, done
// returns an error, or the wait's time (Timeout, or ctx's deadline if
// sooner) runs out. Errors say what was wanted, the last state seen, and
// carry the unit's last journal lines.
func (d *Driver) waitUnit(ctx context.Context, want string, done func(context.Context, UnitState) (bool, error)) error {
	wctx, cancel := context.WithTimeout(ctx, d.timeout())
	defer cancel()
	tick := time.NewTicker(d.poll())
	defer tick.Stop()
	var last UnitState
	var lastErr error
	for {
		s, err := d.State(wctx)
		if err == nil {
			last, lastErr = s, nil
			ok, derr := done(wctx, s)
			if derr != nil {
				return fmt.Errorf("unit %s is %s, not %s: %w; last log lines:\n%s", d.Layout.Unit, last, want, derr, d.Journal(ctx, journalLines))
			}
			if ok {
				return nil
			}
		} else if exec.ExitCode(err) >= 0 {
			// systemctl ran and refused: no such unit, no systemd.
			return fmt.Errorf("read unit %s: %w", d.Layout.Unit, err)
		} else {
			lastErr = err
		}
		select {
		case <-wctx.Done():
			why := fmt.Sprintf("still %s", last)
			if lastErr != nil {
				why = fmt.Sprintf("state unreadable: %v", lastErr)
			}
			return fmt.Errorf("unit %s: %s, not %s: %w; last log lines:\n%s", d.Layout.Unit, why, want, context.Cause(wctx), d.Journal(ctx, journalLines))
		case <-tick.C:
		}
	}
}

// healthy asks the kubelet's health endpoint on the node with curl, or
// wget, or, on a minimal node with neither (Debian's minbase), bash's
// /dev/tcp with a plain HTTP/1.0 GET. Exit code 127 says the node has
// none of them.
func (d *Driver) healthy(ctx context.Context) (bool, error) {
	const probe = `if command -v curl >/dev/null 2>&1; then exec curl -sf --max-time 2 -o /dev/null "$1"; fi
if command -v wget >/dev/null 2>&1; then exec wget -q -T 2 -O /dev/null "$1"; fi
if command -v bash >/dev/null 2>&1 && [ -n "$2" ]; then exec timeout 2 bash -c 'exec 3<>"/dev/tcp/$1/$2" && printf "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" "$3" "$1" >&3 && read -r l <&3 && case "$l" in *" 200 "*) exit 0 ;; esac; exit 1' bash "$2" "$3" "$4"; fi
echo "neither curl, wget nor bash on the node" >&2; exit 127`
	args := []string{d.healthzURL(), "", "", ""}
	if u, err := url.Parse(d.healthzURL()); err == nil && u.Scheme == "http" {
		port := u.Port()
		if port == "" {
			port = "80"
		}
		args = []string{d.healthzURL(), u.Hostname(), port, u.RequestURI()}
	}
	res, err := d.sh(ctx, probe, args...)
	switch {
	case err == nil:
		return true, nil
	case res.ExitCode == 127:
		return false, fmt.Errorf("cannot probe %s: %w", d.healthzURL(), err)
	case res.ExitCode < 0 && ctx.Err() == nil:
		return false, err
	}
	return false, nil
}
