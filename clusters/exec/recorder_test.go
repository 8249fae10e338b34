package exec

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

// sink collects the results a Recorder hands it.
type sink struct {
	mu      sync.Mutex
	results []Result
}

func (s *sink) add(r Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.results = append(s.results, r)
}

func (s *sink) all() []Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.results)
}

func TestRecorderRecords(t *testing.T) {
	big := recordLimit + 1000
	tests := []struct {
		name       string
		argv       []string
		wantCode   int
		wantStdout string // the caller's writer: always everything
		wantStderr string
		recStdout  string // what the record keeps
		recStderr  string
	}{
		{
			name:       "success",
			argv:       []string{"echo", "hello world"},
			wantStdout: "hello world\n",
			recStdout:  "hello world\n",
		},
		{
			name:       "failure with stderr",
			argv:       []string{"sh", "-c", "echo out; echo err >&2; exit 3"},
			wantCode:   3,
			wantStdout: "out\n",
			wantStderr: "err\n",
			recStdout:  "out\n",
			recStderr:  "err\n",
		},
		{
			name:     "missing binary",
			argv:     []string{"/nonexistent/skewtest-no-such-binary"},
			wantCode: -1,
		},
		{
			name:       "stdout beyond the limit is truncated with a marker",
			argv:       []string{"sh", "-c", fmt.Sprintf("head -c %d /dev/zero | tr '\\0' a", big)},
			wantStdout: strings.Repeat("a", big),
			recStdout:  strings.Repeat("a", recordLimit) + "\n[... 1000 more bytes not recorded]\n",
		},
		{
			name:       "stderr beyond the limit is truncated, stdout is not",
			argv:       []string{"sh", "-c", fmt.Sprintf("echo small; head -c %d /dev/zero | tr '\\0' b >&2", big)},
			wantStdout: "small\n",
			wantStderr: strings.Repeat("b", big),
			recStdout:  "small\n",
			recStderr:  strings.Repeat("b", recordLimit) + "\n[... 1000 more bytes not recorded]\n",
		},
		{
			name:       "output of exactly the limit is kept whole",
			argv:       []string{"sh", "-c", fmt.Sprintf("head -c %d /dev/zero | tr '\\0' c", recordLimit)},
			wantStdout: strings.Repeat("c", recordLimit),
			recStdout:  strings.Repeat("c", recordLimit),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s sink
			r := NewRecorder(namedLocal{name: "node-a"}, s.add)
			var stdout, stderr bytes.Buffer
			err := r.Command(t.Context(), tc.argv[0], tc.argv[1:]...).SetStdout(&stdout).SetStderr(&stderr).Run()
			if got := ExitCode(err); got != tc.wantCode {
				t.Errorf("exit code %d (err %v), want %d", got, err, tc.wantCode)
			}
			if stdout.String() != tc.wantStdout || stderr.String() != tc.wantStderr {
				t.Errorf("caller's writers got %.100q, %.100q, want %.100q, %.100q", stdout.String(), stderr.String(), tc.wantStdout, tc.wantStderr)
			}
			got := s.all()
			if len(got) != 1 {
				t.Fatalf("sink got %d results, want 1", len(got))
			}
			res := got[0]
			if !slices.Equal(res.Argv, tc.argv) {
				t.Errorf("recorded argv %q, want %q", res.Argv, tc.argv)
			}
			if res.Node != "node-a" {
				t.Errorf("recorded node %q, want node-a", res.Node)
			}
			if res.ExitCode != tc.wantCode {
				t.Errorf("recorded exit code %d, want %d", res.ExitCode, tc.wantCode)
			}
			if res.Stdout != tc.recStdout {
				t.Errorf("recorded stdout (%d bytes) %.100q...%q, want (%d bytes) %.100q...", len(res.Stdout), res.Stdout, lastN(res.Stdout, 60), len(tc.recStdout), tc.recStdout)
			}
			if res.Stderr != tc.recStderr {
				t.Errorf("recorded stderr (%d bytes) %.100q...%q, want (%d bytes) %.100q...", len(res.Stderr), res.Stderr, lastN(res.Stderr, 60), len(tc.recStderr), tc.recStderr)
			}
			if res.Started.IsZero() || res.Duration <= 0 {
				t.Errorf("Started, Duration = %v, %v; want both set", res.Started, res.Duration)
			}
		})
	}
}

func lastN(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

func TestRecorderWithoutCallerWriters(t *testing.T) {
	var s sink
	r := NewRecorder(Local{}, s.add)
	if err := r.Command(t.Context(), "sh", "-c", "echo out; echo err >&2").Run(); err != nil {
		t.Fatal(err)
	}
	got := s.all()
	if len(got) != 1 || got[0].Stdout != "out\n" || got[0].Stderr != "err\n" {
		t.Fatalf("recorded %+v, want one result with out/err", got)
	}
	if got[0].Node != "" {
		t.Errorf("node %q for an unnamed Cmder, want empty", got[0].Node)
	}
}

func TestRecorderThroughOutput(t *testing.T) {
	var s sink
	r := NewRecorder(namedLocal{name: "node-b"}, s.add)
	res, err := OutputStdin(t.Context(), r, strings.NewReader("piped\n"), "sh", "-c", "cat; exit 5")
	if ExitCode(err) != 5 {
		t.Fatalf("exit code %d (%v), want 5", ExitCode(err), err)
	}
	if res.Node != "node-b" || res.Stdout != "piped\n" {
		t.Errorf("Output result node %q stdout %q, want node-b, piped", res.Node, res.Stdout)
	}
	if !strings.Contains(err.Error(), " on node-b exited 5") {
		t.Errorf("error %q does not name the node", err)
	}
	got := s.all()
	if len(got) != 1 || got[0].Stdout != "piped\n" || got[0].ExitCode != 5 || got[0].CommandLine() != "sh -c 'cat; exit 5'" {
		t.Errorf("recorded %+v", got)
	}
}

func TestRecorderSetSink(t *testing.T) {
	var first, second sink
	r := NewRecorder(Local{}, first.add)
	run := func(arg string) {
		t.Helper()
		if err := r.Command(t.Context(), "echo", arg).Run(); err != nil {
			t.Fatal(err)
		}
	}
	run("one")
	r.SetSink(second.add)
	run("two")
	run("three")
	r.SetSink(nil)
	run("dropped") // a nil sink must not panic

	lines := func(rs []Result) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.CommandLine())
		}
		return out
	}
	if got, want := lines(first.all()), []string{"echo one"}; !slices.Equal(got, want) {
		t.Errorf("first sink got %q, want %q", got, want)
	}
	if got, want := lines(second.all()), []string{"echo two", "echo three"}; !slices.Equal(got, want) {
		t.Errorf("second sink got %q, want %q", got, want)
	}
}

func TestLimitedBuffer(t *testing.T) {
	tests := []struct {
		name          string
		writes        []int
		wantKept      int
		wantTruncated int
	}{
		{"nothing", nil, 0, 0},
		{"small", []int{10, 20}, 30, 0},
		{"exactly the limit in one write", []int{recordLimit}, recordLimit, 0},
		{"exactly the limit in two writes", []int{recordLimit - 1, 1}, recordLimit, 0},
		{"write crossing the limit", []int{recordLimit - 1, 2}, recordLimit, 1},
		{"writes after the limit", []int{recordLimit, 1, 5}, recordLimit, 6},
		{"one huge write", []int{3 * recordLimit}, recordLimit, 2 * recordLimit},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var l limitedBuffer
			var want strings.Builder
			for i, n := range tc.writes {
				p := bytes.Repeat([]byte{byte('a' + i)}, n)
				got, err := l.Write(p)
				if err != nil || got != n {
					t.Fatalf("Write(%d bytes) = %d, %v; want %d, nil (a short write would fail the command)", n, got, err, n)
				}
				want.Write(p)
			}
			kept := want.String()[:tc.wantKept]
			wantStr := kept
			if tc.wantTruncated > 0 {
				wantStr += fmt.Sprintf("\n[... %d more bytes not recorded]\n", tc.wantTruncated)
			}
			if got := l.String(); got != wantStr {
				t.Errorf("String() = %d bytes ending %q, want %d bytes ending %q", len(got), lastN(got, 60), len(wantStr), lastN(wantStr, 60))
			}
		})
	}
}
