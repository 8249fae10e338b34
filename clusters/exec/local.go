package exec

import (
	"context"
	"io"
	"os"
	osexec "os/exec"
	"syscall"
	"time"
)

// Local runs commands on this host.
type Local struct{}

// Command implements Cmder.
func (Local) Command(ctx context.Context, name string, args ...string) Cmd {
	c := osexec.CommandContext(ctx, name, args...)
	// Kill the whole process group on cancel, so shell pipelines do not
	// outlive the step that started them.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	c.WaitDelay = 5 * time.Second
	return &localCmd{c: c}
}

type localCmd struct{ c *osexec.Cmd }

func (l *localCmd) Run() error { return l.c.Run() }
func (l *localCmd) SetEnv(env ...string) Cmd {
	l.c.Env = append(os.Environ(), env...)
	return l
}
func (l *localCmd) SetStdin(r io.Reader) Cmd  { l.c.Stdin = r; return l }
func (l *localCmd) SetStdout(w io.Writer) Cmd { l.c.Stdout = w; return l }
func (l *localCmd) SetStderr(w io.Writer) Cmd { l.c.Stderr = w; return l }
