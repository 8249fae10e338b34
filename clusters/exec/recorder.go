package exec

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// Recorder wraps a Cmder and hands every finished command's Result to a
// sink, so a scenario step can report each command it ran without the code
// that runs them knowing about reports.
type Recorder struct {
	Inner Cmder
	mu    sync.Mutex
	sink  func(Result)
}

// NewRecorder returns a Recorder passing results to sink.
func NewRecorder(inner Cmder, sink func(Result)) *Recorder {
	return &Recorder{Inner: inner, sink: sink}
}

// SetSink changes where results go (one sink per step).
func (r *Recorder) SetSink(sink func(Result)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sink = sink
}

func (r *Recorder) String() string {
	if s, ok := r.Inner.(fmt.Stringer); ok {
		return s.String()
	}
	return ""
}

// Command implements Cmder.
func (r *Recorder) Command(ctx context.Context, name string, args ...string) Cmd {
	return &recordedCmd{r: r, inner: r.Inner.Command(ctx, name, args...), argv: append([]string{name}, args...)}
}

// Maximum bytes of stdout or stderr a record keeps; the rest is elided so a
// report stays readable (full outputs belong in artifacts).
const recordLimit = 64 << 10

type recordedCmd struct {
	r              *Recorder
	inner          Cmd
	argv           []string
	stdout, stderr io.Writer
}

func (c *recordedCmd) SetEnv(env ...string) Cmd  { c.inner.SetEnv(env...); return c }
func (c *recordedCmd) SetStdin(in io.Reader) Cmd { c.inner.SetStdin(in); return c }
func (c *recordedCmd) SetStdout(w io.Writer) Cmd { c.stdout = w; return c }
func (c *recordedCmd) SetStderr(w io.Writer) Cmd { c.stderr = w; return c }

func (c *recordedCmd) Run() error {
	var out, errb limitedBuffer
	c.inner.SetStdout(tee(c.stdout, &out)).SetStderr(tee(c.stderr, &errb))
	res := Result{Node: c.r.String(), Argv: c.argv, Started: time.Now()}
	err := c.inner.Run()
	res.Duration = time.Since(res.Started)
	res.Stdout, res.Stderr, res.ExitCode = out.String(), errb.String(), ExitCode(err)
	c.r.mu.Lock()
	sink := c.r.sink
	c.r.mu.Unlock()
	if sink != nil {
		sink(res)
	}
	return err
}

func tee(w io.Writer, b *limitedBuffer) io.Writer {
	if w == nil {
		return b
	}
	return io.MultiWriter(w, b)
}

type limitedBuffer struct {
	buf       bytes.Buffer
	truncated int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	room := recordLimit - l.buf.Len()
	if room >= len(p) {
		return l.buf.Write(p)
	}
	if room > 0 {
		l.buf.Write(p[:room])
	}
	l.truncated += len(p) - max(room, 0)
	return len(p), nil
}

func (l *limitedBuffer) String() string {
	if l.truncated > 0 {
		return l.buf.String() + fmt.Sprintf("\n[... %d more bytes not recorded]\n", l.truncated)
	}
	return l.buf.String()
}
