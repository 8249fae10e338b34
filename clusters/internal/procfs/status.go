package procfs

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ReadPeakRSS reads the process's peak resident set size, in bytes: VmHWM
// of /proc/<pid>/status, the high-water mark of its memory since it
// started (or since its last exec, which replaces its memory).
func ReadPeakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("pid %d: %w", pid, ErrNotExist)
	}
	if err != nil {
		return 0, err
	}
	return ParsePeakRSS(string(b))
}

// ParsePeakRSS reads VmHWM from the content of a status file ("VmHWM:
// 81234 kB"); a kernel thread, which has no memory of its own, has none.
func ParsePeakRSS(status string) (int64, error) {
	for _, line := range strings.Split(status, "\n") {
		v, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("status: VmHWM %q, want a number of kB", strings.TrimSpace(v))
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("status: VmHWM %q: %w", strings.TrimSpace(v), err)
		}
		return kb << 10, nil
	}
	return 0, errors.New("status: no VmHWM (a kernel thread, or a process that has exited)")
}
