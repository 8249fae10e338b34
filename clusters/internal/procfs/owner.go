package procfs

import (
	"errors"
	"fmt"
	"os"
)

// Owner is a process, told apart from a later one with the same pid by its
// start time, the boot it ran in and its pid namespace.
type Owner struct {
	PID int `json:"pid,omitempty"`
	// Start is field 22 of /proc/PID/stat: clock ticks after boot.
	Start uint64 `json:"start,omitempty"`
	// BootID is /proc/sys/kernel/random/boot_id; PIDNamespace the link
	// /proc/self/ns/pid, in whose pids PID is.
	BootID       string `json:"bootID,omitempty"`
	PIDNamespace string `json:"pidNamespace,omitempty"`
}

// Self is this process as an Owner.
func Self() Owner {
	o := Owner{PID: os.Getpid(), BootID: BootID()}
	if st, err := ReadStat(o.PID); err == nil {
		o.Start = st.StartTime
	}
	o.PIDNamespace, _ = os.Readlink("/proc/self/ns/pid")
	return o
}

// IsSelf says whether o is this process.
func (o Owner) IsSelf() bool { s := Self(); return o.PID == s.PID && o.Start == s.Start }

// Liveness of an Owner: whether it still runs.
type Liveness int

const (
	// Gone: the process is no more.
	Gone Liveness = iota
	// Live: it still runs; what it acts on must be left alone.
	Live
	// Unknown: the record does not tell (an older one, or one written
	// in another pid namespace).
	Unknown
)

// Liveness tells whether o still runs, and says what it found.
func (o Owner) Liveness() (Liveness, string) {
	if o.PID <= 0 {
		return Unknown, "the state records no process (written by a skewtest that did not record one)"
	}
	if o.BootID != "" && o.BootID != BootID() {
		return Gone, fmt.Sprintf("pid %d ran before the host last booted", o.PID)
	}
	if ns, _ := os.Readlink("/proc/self/ns/pid"); o.PIDNamespace == "" || o.PIDNamespace != ns {
		return Unknown, fmt.Sprintf("pid %d is of pid namespace %q, not this process's %q", o.PID, o.PIDNamespace, ns)
	}
	st, err := ReadStat(o.PID)
	switch {
	case errors.Is(err, ErrNotExist):
		return Gone, fmt.Sprintf("pid %d is gone", o.PID)
	case err != nil:
		return Unknown, fmt.Sprintf("pid %d: %v", o.PID, err)
	case st.Dead():
		return Gone, fmt.Sprintf("pid %d has exited", o.PID)
	case o.Start == 0:
		return Unknown, fmt.Sprintf("pid %d (%s) runs, but the state does not say when the run's process started", o.PID, st.Comm)
	case st.StartTime != o.Start:
		return Gone, fmt.Sprintf("pid %d is another process now (%s, started at tick %d, not %d)", o.PID, st.Comm, st.StartTime, o.Start)
	}
	return Live, fmt.Sprintf("its process, pid %d (%s), still runs", o.PID, st.Comm)
}
