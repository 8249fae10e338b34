// Package loopdev lists, attaches and detaches loop devices: the one place
// skewtest touches them, for the CSI driver's EBS mode (a volume is a loop
// device over a sparse file), for the kubelet's own block-volume loop
// devices seen in evidence, and for teardown.
package loopdev

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec" // losetup on this host, whose loop devices every node shares
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	nodeexec "sigs.k8s.io/skewtest/clusters/exec"
	"sigs.k8s.io/skewtest/clusters/mountinfo"
)

// Device is one attached loop device.
type Device struct {
	// Path is the device node, e.g. /dev/loop3.
	Path string `json:"path"`
	// BackingFile is the file the kernel says backs it, without the
	// " (deleted)" suffix it adds when the file was removed.
	BackingFile string `json:"backingFile"`
	// Deleted tells whether the backing file was removed.
	Deleted bool `json:"deleted,omitempty"`
}

// sysBlock is where the kernel lists block devices.
const sysBlock = "/sys/block"

// List returns the attached loop devices, by device number.
func List() ([]Device, error) { return ListIn(sysBlock) }

// ListIn is List over the block devices listed in dir (/sys/block, or a
// test's copy of it).
func ListIn(dir string) ([]Device, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list loop devices: %w", err)
	}
	var out []Device
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "loop") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "loop", "backing_file"))
		if err != nil {
			// Not attached: the loop directory exists only while bound.
			continue
		}
		out = append(out, device(e.Name(), string(b)))
	}
	sort.Slice(out, func(i, j int) bool { return devNum(out[i].Path) < devNum(out[j].Path) })
	return out, nil
}

// device is loop device name (loop3) with the kernel's backing_file text.
func device(name, backing string) Device {
	d := Device{Path: "/dev/" + name, BackingFile: strings.TrimSpace(backing)}
	if f, ok := strings.CutSuffix(d.BackingFile, " (deleted)"); ok {
		d.BackingFile, d.Deleted = f, true
	}
	return d
}

// listScript prints every attached loop device of the node as
// "<name>\0<backing_file>\0", as List reads them.
const listScript = `for d in ` + sysBlock + `/loop*; do f=$d/loop/backing_file; [ -r "$f" ] || continue; printf '%s\0' "${d##*/}"; tr -d '\n' <"$f"; printf '\0'; done; exit 0`

// ListOn is List on a node reached through node (a kind node container,
// an SSH session, this host): the scenario's evidence of block volumes'
// loop devices, whatever the provider.
func ListOn(ctx context.Context, node nodeexec.Cmder) ([]Device, error) {
	res, err := nodeexec.Output(ctx, node, "sh", "-c", listScript)
	if err != nil {
		return nil, fmt.Errorf("list loop devices on the node: %w", err)
	}
	f := strings.Split(res.Stdout, "\x00")
	var out []Device
	for i := 0; i+1 < len(f); i += 2 {
		out = append(out, device(f[i], f[i+1]))
	}
	sort.Slice(out, func(i, j int) bool { return devNum(out[i].Path) < devNum(out[j].Path) })
	return out, nil
}

func devNum(p string) int {
	n := 0
	fmt.Sscanf(strings.TrimPrefix(p, "/dev/loop"), "%d", &n)
	return n
}

// BackedUnder returns the loop devices whose backing file is at or below
// dir.
func BackedUnder(dir string) ([]Device, error) {
	all, err := List()
	if err != nil {
		return nil, err
	}
	var out []Device
	for _, d := range all {
		if mountinfo.IsUnder(d.BackingFile, dir) {
			out = append(out, d)
		}
	}
	return out, nil
}

// BackingFile is the file backing dev, or "" if dev is not an attached
// loop device.
func BackingFile(dev string) string {
	b, err := os.ReadFile(filepath.Join(sysBlock, filepath.Base(dev), "loop", "backing_file"))
	if err != nil {
		return ""
	}
	f, _ := strings.CutSuffix(strings.TrimSpace(string(b)), " (deleted)")
	return f
}

// Attach binds a free loop device to file and returns the device.
func Attach(ctx context.Context, file string) (string, error) {
	out, err := exec.CommandContext(ctx, "losetup", "--find", "--show", file).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("losetup --find --show %s: %w: %s", file, err, strings.TrimSpace(string(out)))
	}
	dev := strings.TrimSpace(string(out))
	if !strings.HasPrefix(dev, "/dev/loop") {
		return "", fmt.Errorf("losetup --find --show %s printed %q, not a loop device", file, dev)
	}
	return dev, nil
}

// Detach unbinds dev. A device still open (mounted, or backing another loop
// device) is only marked to detach when last closed, as losetup -d does;
// a device already detached is not an error.
func Detach(ctx context.Context, dev string) error {
	if BackingFile(dev) == "" {
		return nil
	}
	out, err := exec.CommandContext(ctx, "losetup", "--detach", dev).CombinedOutput()
	if err != nil && BackingFile(dev) != "" {
		return fmt.Errorf("losetup --detach %s: %w: %s", dev, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// DetachUnder detaches every loop device backed by a file at or below dir,
// and every loop device over one of those (the kubelet's own loop device
// over a block volume, whose backing path the kernel shows as "/" once the
// bind mount it was opened through is gone), and waits up to timeout for
// them to go: teardown, after the mounts under dir are gone. A loop device
// over another holds it open, so the ones on top go first and several
// rounds may be needed.
func DetachUnder(ctx context.Context, dir string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		devs, err := BackedUnder(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		all, err := List()
		if err != nil {
			return err
		}
		devs = append(loopsOver(all, devs), devs...)
		if len(devs) == 0 {
			return nil
		}
		// Loop devices on top first, then newest first: a kubelet's loop
		// device over a driver's.
		var errs []error
		for i := range devs {
			if err := Detach(ctx, devs[i].Path); err != nil {
				errs = append(errs, err)
			}
		}
		if time.Now().After(deadline) {
			var names []string
			for _, d := range devs {
				names = append(names, d.Path+" ("+d.BackingFile+")")
			}
			err := fmt.Errorf("loop devices still attached to files under %s after %s: %s", dir, timeout, strings.Join(names, ", "))
			if len(errs) > 0 {
				err = fmt.Errorf("%w: %w", err, errors.Join(errs...))
			}
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// loopsOver returns the devices among all whose backing file is the
// device node of one of devs, at any depth, those on top first: a loop
// device over a loop device, however it was opened (the kernel reports the
// backing file's device and inode, LOOP_GET_STATUS64, whatever its path).
func loopsOver(all, devs []Device) []Device {
	var out []Device
	seen := map[string]bool{}
	for _, d := range devs {
		seen[d.Path] = true
	}
	for base := devs; len(base) > 0; {
		ids := map[[2]uint64]bool{}
		for _, d := range base {
			var st unix.Stat_t
			if unix.Stat(d.Path, &st) == nil {
				ids[[2]uint64{st.Dev, st.Ino}] = true
			}
		}
		var next []Device
		for _, a := range all {
			if id, ok := backingID(a.Path); ok && ids[id] && !seen[a.Path] {
				seen[a.Path] = true
				next = append(next, a)
			}
		}
		out = append(next, out...)
		base = next
	}
	return out
}

// backingID is the device and inode of dev's backing file.
func backingID(dev string) ([2]uint64, bool) {
	fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return [2]uint64{}, false
	}
	defer unix.Close(fd)
	info, err := unix.IoctlLoopGetStatus64(fd)
	if err != nil {
		return [2]uint64{}, false
	}
	return [2]uint64{info.Device, info.Inode}, true
}
