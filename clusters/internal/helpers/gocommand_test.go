package helpers

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The go command dies with the skewtest that started it: killed with
// SIGKILL (chaos: "SIGKILL, then skewtest clean"), a skewtest's go build
// went on and wrote its output into the run directory that clean had
// removed. Here a child of this test starts a stand-in go (a shell that
// records its pid and sleeps) through goCommand and is killed; the
// stand-in must die with it.
func TestGoCommandDiesWithSkewtest(t *testing.T) {
	if os.Getenv("SKEWTEST_GOCOMMAND_CHILD") != "" {
		cmd := goCommand(t.Context(), t.TempDir(), []string{"build"})
		if err := cmd.Start(); err != nil {
			os.Exit(3)
		}
		time.Sleep(time.Minute)
		return
	}
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	script := "#!/bin/sh\necho $$ > " + pidFile + "\nexec sleep 60\n"
	if err := os.WriteFile(filepath.Join(dir, "go"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	child := exec.Command(os.Args[0], "-test.run=^TestGoCommandDiesWithSkewtest$")
	child.Env = append(os.Environ(), "SKEWTEST_GOCOMMAND_CHILD=1", "PATH="+dir+":"+os.Getenv("PATH"))
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	for deadline := time.Now().Add(30 * time.Second); pid == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if b, err := os.ReadFile(pidFile); err == nil {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
	}
	if pid == 0 {
		child.Process.Kill()
		t.Fatal("the stand-in go never started")
	}
	child.Process.Kill()
	child.Wait()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err := syscall.Kill(pid, 0); err != nil {
			return
		}
	}
	syscall.Kill(pid, syscall.SIGKILL)
	t.Errorf("the go command (pid %d) outlived the skewtest that started it", pid)
}
