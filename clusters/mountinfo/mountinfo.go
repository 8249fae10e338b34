// Package mountinfo parses /proc/<pid>/mountinfo (see proc(5)) and answers
// the few questions skewtest asks of a mount table: what is mounted at or
// below a directory, and how many times a path is mounted.
//
// It has no dependencies beyond the standard library and never reads the
// file system itself except in ParseFile: callers that read a node's table
// through a command parse the text with Parse.
package mountinfo

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
)

// Mount is one line of a mountinfo file. Root, MountPoint, FSType and
// Source are unescaped (the kernel writes space, tab, newline and backslash
// as \040, \011, \012 and \134); Options and SuperOptions are kept as
// written.
type Mount struct {
	ID, ParentID int
	// MajorMinor is st_dev of the file system, "major:minor".
	MajorMinor string
	// Root is the directory of the file system that forms the root of this
	// mount (not "/" for bind mounts of a sub-directory).
	Root       string
	MountPoint string
	// Options are the per-mount options (rw,relatime,...).
	Options string
	// Optional holds the optional fields (shared:N, master:N,
	// propagate_from:N, unbindable), nil when there are none.
	Optional     []string
	FSType       string
	Source       string
	SuperOptions string
}

// Parse reads a mountinfo table. Blank lines are skipped; any other line
// that does not follow the format is an error naming its line number.
func Parse(r io.Reader) ([]Mount, error) {
	var mounts []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		m, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("mountinfo line %d: %w: %q", n, err, line)
		}
		mounts = append(mounts, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("mountinfo after line %d: %w", n, err)
	}
	return mounts, nil
}

// ParseFile parses the mountinfo file at path, e.g. /proc/self/mountinfo.
func ParseFile(path string) ([]Mount, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	mounts, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return mounts, nil
}

func parseLine(line string) (Mount, error) {
	// Fields are separated by exactly one space; a field may be empty (a
	// mount whose source is ""), so strings.Fields would be wrong.
	f := strings.Split(line, " ")
	sep := -1
	for i := 6; i < len(f); i++ {
		if f[i] == "-" {
			sep = i
			break
		}
	}
	if len(f) < 10 || sep < 0 {
		return Mount{}, fmt.Errorf("want 6 fields, optional fields, \"-\" and 3 fields, got %d fields", len(f))
	}
	if len(f)-sep-1 != 3 {
		return Mount{}, fmt.Errorf("want 3 fields after \"-\", got %d", len(f)-sep-1)
	}
	var m Mount
	var err error
	if m.ID, err = strconv.Atoi(f[0]); err != nil {
		return Mount{}, fmt.Errorf("bad mount ID %q", f[0])
	}
	if m.ParentID, err = strconv.Atoi(f[1]); err != nil {
		return Mount{}, fmt.Errorf("bad parent ID %q", f[1])
	}
	if !validMajorMinor(f[2]) {
		return Mount{}, fmt.Errorf("bad major:minor %q", f[2])
	}
	m.MajorMinor = f[2]
	m.Root = Unescape(f[3])
	m.MountPoint = Unescape(f[4])
	if !strings.HasPrefix(m.MountPoint, "/") {
		return Mount{}, fmt.Errorf("mount point %q is not absolute", f[4])
	}
	m.Options = f[5]
	if sep > 6 {
		m.Optional = append([]string(nil), f[6:sep]...)
	}
	m.FSType = Unescape(f[sep+1])
	m.Source = Unescape(f[sep+2])
	m.SuperOptions = f[sep+3]
	if m.FSType == "" {
		return Mount{}, fmt.Errorf("empty file system type")
	}
	return m, nil
}

func validMajorMinor(s string) bool {
	maj, min, ok := strings.Cut(s, ":")
	if !ok {
		return false
	}
	_, err1 := strconv.ParseUint(maj, 10, 32)
	_, err2 := strconv.ParseUint(min, 10, 32)
	return err1 == nil && err2 == nil
}

// Unescape undoes the kernel's octal escapes (\NNN, three octal digits). A
// backslash not followed by three octal digits is kept as is.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			v := (s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0')
			if s[i+1] <= '3' { // \400 and above do not fit a byte
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Escape is the inverse of Unescape for the characters the kernel escapes
// in mountinfo paths: space, tab, newline and backslash.
func Escape(s string) string {
	if !strings.ContainsAny(s, " \t\n\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\\':
			fmt.Fprintf(&b, `\%03o`, c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// Under returns the mounts whose mount point is dir or lies below it,
// comparing whole path components: /a/b is under /a, /a/bc is not. dir is
// cleaned first; the result keeps the table's order.
func Under(mounts []Mount, dir string) []Mount {
	dir = path.Clean(dir)
	var out []Mount
	for _, m := range mounts {
		if IsUnder(m.MountPoint, dir) {
			out = append(out, m)
		}
	}
	return out
}

// IsUnder reports whether p is dir or a path below it, comparing whole
// path components. Both are expected to be clean absolute paths.
func IsUnder(p, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// CountAt returns how many mounts have p (cleaned) as their mount point:
// more than one when mounts are stacked.
func CountAt(mounts []Mount, p string) int {
	p = path.Clean(p)
	n := 0
	for _, m := range mounts {
		if m.MountPoint == p {
			n++
		}
	}
	return n
}

// IsMountPoint reports whether anything is mounted at p.
func IsMountPoint(mounts []Mount, p string) bool { return CountAt(mounts, p) > 0 }
