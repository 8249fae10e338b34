package csidriver

// This file is the fail knob: a file in the knob directory (Config.StallDir,
// where the stall knob's files live too) makes calls of one method for one
// volume fail with a gRPC code, a given number of times or until the file
// is removed, so that a scenario reaches the kubelet's error paths.

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// FailSuffix names the fail knob's directory for a method in the knob
// directory: <StallDir>/<Method>.fail/<volume ID, path-escaped>.
const FailSuffix = ".fail"

// failAlways is the count that makes every call fail until the file goes.
const failAlways = "always"

// Fail is one fail knob: while its file exists (Fail.Path), calls of
// Method for VolumeID fail with Code before the driver does anything, the
// first Times of them, or every one when Times is 0. Writing the file
// again (a new file) starts the count again; so does a restart of the
// driver, which keeps its counts in memory.
type Fail struct {
	// Method is the CSI method's short name, e.g. "NodeStageVolume".
	Method string
	// VolumeID is the request's volume_id.
	VolumeID string
	// Code is the gRPC code the calls fail with; not codes.OK.
	Code codes.Code
	// Times is how many calls fail; 0: every call until the file goes.
	Times int
}

// Path is the knob's file in the knob directory dir.
func (f Fail) Path(dir string) string {
	return filepath.Join(dir, f.Method+FailSuffix, url.PathEscape(f.VolumeID))
}

// Content is what the knob's file holds: the code's name and the count,
// e.g. "FailedPrecondition 2" or "Unavailable always".
func (f Fail) Content() string {
	n := failAlways
	if f.Times > 0 {
		n = strconv.Itoa(f.Times)
	}
	return f.Code.String() + " " + n + "\n"
}

// Validate refuses a knob the driver could not serve.
func (f Fail) Validate() error {
	switch {
	case f.Method == "" || strings.ContainsAny(f.Method, "/."):
		return fmt.Errorf("fail knob: method %q is not a CSI method's short name (e.g. NodeStageVolume)", f.Method)
	case f.VolumeID == "":
		return errors.New("fail knob: no volume ID")
	case f.Code == codes.OK:
		return fmt.Errorf("fail knob for %s of %s: code OK is no failure; give a gRPC error code (FailedPrecondition, Unavailable, ...)", f.Method, f.VolumeID)
	case f.Times < 0:
		return fmt.Errorf("fail knob for %s of %s: %d times; give a positive count, or 0 for every call until the knob is removed", f.Method, f.VolumeID, f.Times)
	}
	return nil
}

// FinalForKubelet tells whether the kubelet's CSI plugin takes a call
// that failed with code c as finished (the operation did not start, or
// failed for good) rather than uncertain (it may still be in progress).
// It is isFinalError of the kubelet's pkg/volume/csi/csi_client.go: every
// code but Canceled, DeadlineExceeded, Unavailable, ResourceExhausted and
// Aborted.
func FinalForKubelet(c codes.Code) bool {
	switch c {
	case codes.Canceled, codes.DeadlineExceeded, codes.Unavailable, codes.ResourceExhausted, codes.Aborted:
		return false
	}
	return true
}

// parseFail reads a knob file's content (Fail.Content).
func parseFail(b []byte) (codes.Code, int, error) {
	fields := strings.Fields(string(b))
	if len(fields) != 2 {
		return 0, 0, fmt.Errorf("want \"<gRPC code> <count|%s>\", e.g. \"FailedPrecondition 2\"; got %q", failAlways, strings.TrimSpace(string(b)))
	}
	code, ok := codeNamed(fields[0])
	if !ok || code == codes.OK {
		return 0, 0, fmt.Errorf("%q is not a gRPC error code (FailedPrecondition, InvalidArgument, Unavailable, ...)", fields[0])
	}
	if fields[1] == failAlways {
		return code, 0, nil
	}
	n, err := strconv.Atoi(fields[1])
	if err != nil || n <= 0 {
		return 0, 0, fmt.Errorf("count %q: want a positive number or %q", fields[1], failAlways)
	}
	return code, n, nil
}

// codeNamed is the gRPC code whose String is name ("FailedPrecondition").
func codeNamed(name string) (codes.Code, bool) {
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if c.String() == name {
			return c, true
		}
	}
	return 0, false
}

// failKey is one knob file as written: a file written again (a new inode,
// or a new modification time) counts afresh.
type failKey struct {
	path  string
	ino   uint64
	mtime int64
}

// failed returns the error the fail knob makes a call of method for
// volumeID return, or nil when no knob applies (no knob directory, no
// volume ID, no file, or the file's count spent). A knob file that cannot
// be read as one fails the call with Internal, naming the file and the
// format, rather than letting it through unnoticed.
func (d *Driver) failed(method, volumeID string) error {
	if d.cfg.StallDir == "" || volumeID == "" {
		return nil
	}
	file := Fail{Method: method, VolumeID: volumeID}.Path(d.cfg.StallDir)
	d.failMu.Lock()
	defer d.failMu.Unlock()
	fi, err := os.Stat(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return status.Errorf(codes.Internal, "skewtest fail knob %s: %v", file, err)
	}
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // removed meanwhile
	}
	if err != nil {
		return status.Errorf(codes.Internal, "skewtest fail knob %s: %v", file, err)
	}
	code, times, err := parseFail(b)
	if err != nil {
		return status.Errorf(codes.Internal, "skewtest fail knob %s: %v", file, err)
	}
	key := failKey{path: file, mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		key.ino = st.Ino
	}
	if d.failCounts == nil {
		d.failCounts = map[failKey]int{}
	}
	n := d.failCounts[key]
	if times > 0 && n >= times {
		return nil
	}
	d.failCounts[key] = n + 1
	of := "until the knob is removed"
	if times > 0 {
		of = fmt.Sprintf("of %d", times)
	}
	d.log.Info("failing a call: the fail knob's file exists", "method", method, "volume", volumeID, "file", file, "code", code.String(), "failure", n+1, "times", times)
	return status.Errorf(code, "skewtest fail knob %s: failure %d %s", file, n+1, of)
}
