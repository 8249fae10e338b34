package reports

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// MaxLogBytes bounds each log and API dump a run writes among its
// artifacts: nightly jobs upload $ARTIFACTS whole, and a kubelet at a high
// verbosity, or a cluster with many objects, would fill it. What is cut
// is said at the end of the file (CapWriter).
const MaxLogBytes = 32 << 20

// CapWriter passes the first limit bytes written to it on to w and
// counts the rest, which it drops; Close then says, at the end of what w
// got, how much was cut. It never fails a write for the cut: a log
// stream copied into it runs to its end.
type CapWriter struct {
	w     io.Writer
	limit int64
	n     int64 // bytes passed on
	cut   int64 // bytes dropped
	err   error // w's first error
}

// NewCapWriter caps what goes to w at limit bytes.
func NewCapWriter(w io.Writer, limit int64) *CapWriter { return &CapWriter{w: w, limit: limit} }

func (c *CapWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	room := c.limit - c.n
	keep := int64(len(p))
	if keep > room {
		keep = max(room, 0)
	}
	if keep > 0 {
		m, err := c.w.Write(p[:keep])
		c.n += int64(m)
		if err != nil {
			c.err = err
			return m, err
		}
	}
	c.cut += int64(len(p)) - keep
	return len(p), nil
}

// Cut is how many bytes were dropped.
func (c *CapWriter) Cut() int64 { return c.cut }

// Close writes the line that says what was cut, if anything was; it does
// not close w.
func (c *CapWriter) Close() error {
	if c.err != nil || c.cut == 0 {
		return c.err
	}
	_, err := fmt.Fprint(c.w, cutLine(c.cut, c.limit))
	return err
}

// CapFiles cuts every regular file under dir longer than limit bytes to
// its first limit bytes, followed by the line CapWriter's Close writes,
// and returns the files it cut (relative to dir). It bounds what a
// provider's own log collection wrote (kind's, kops toolbox dump's, a
// kubectl cluster-info dump), as CapWriter bounds what skewtest writes.
// Symbolic links are not followed.
func CapFiles(dir string, limit int64) ([]string, error) {
	var cut []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err != nil || fi.Size() <= limit {
			return err
		}
		if err := os.Truncate(p, limit); err != nil {
			return err
		}
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		_, werr := fmt.Fprint(f, cutLine(fi.Size()-limit, limit))
		if err := errors.Join(werr, f.Close()); err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		cut = append(cut, rel)
		return nil
	})
	return cut, err
}

// cutLine ends a file skewtest cut: how much was dropped, and the limit.
func cutLine(cut, limit int64) string {
	return fmt.Sprintf("\n[skewtest cut this file here: %d more bytes were not kept (limit %d bytes)]\n", cut, limit)
}
