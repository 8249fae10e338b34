package chaos

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"syscall"
	"time"
)

// phase is a point of a run's life, told by the first log line that
// matches marker: the signal is sent a random delay (up to maxDelay)
// after that line.
type phase struct {
	name     string
	marker   *regexp.Regexp
	maxDelay time.Duration
	// late: the run may have ended before the signal lands (the last
	// phase), which is then no interrupt and says so.
	late bool
}

// phases cover a run from its first step to its teardown. With a warm
// cache the kubelets resolve in milliseconds, so "build" is the resolving
// and the builds it starts when the cache is cold.
var phases = []phase{
	{name: "build", marker: regexp.MustCompile(`msg="resolving kubelet binaries"`), maxDelay: 200 * time.Millisecond},
	// local: its cgroups, then containerd; kind: its private dockerd,
	// then the kind cluster's creation.
	{name: "bring-up", marker: regexp.MustCompile(`msg="(cgroups made|containerd ready, images imported|dockerd is up|creating kind cluster)"`), maxDelay: 2 * time.Second},
	{name: "deploy", marker: regexp.MustCompile(`msg="step 1: deploy`), maxDelay: 2 * time.Second},
	{name: "kubelet down", marker: regexp.MustCompile(`msg="step 5: hop 1: force-delete`), maxDelay: 300 * time.Millisecond},
	{name: "cleanup poll", marker: regexp.MustCompile(`msg="step 8: hop 1: wait until the old pods`), maxDelay: 1500 * time.Millisecond},
	{name: "teardown", marker: regexp.MustCompile(`msg="step 20 passed`), maxDelay: 500 * time.Millisecond, late: true},
}

// sig is a signal the suite sends; kill is SIGKILL, after which the
// suite runs `skewtest clean` (nothing can be handled in the run). With
// closePipe the suite first closes its end of the run's stderr, as tee
// killed by a Ctrl-C does, and sends the signal pipeSettle later: the
// closed output stops the run as SIGHUP would, and the signal must not
// cut its teardown short.
type sig struct {
	name      string
	s         syscall.Signal
	exit      int // skewtest's exit code after it (128 + the signal's number)
	orExit    int // another exit code it may take (0: none)
	clean     bool
	closePipe bool
}

// pipeSettle is how long after closing the run's stderr the suite sends
// the signal: the run logs several lines a second, so by then it has met
// the closed output.
const pipeSettle = 500 * time.Millisecond

var signals = []sig{
	{name: "SIGINT", s: syscall.SIGINT, exit: 130},
	{name: "SIGTERM", s: syscall.SIGTERM, exit: 143},
	{name: "SIGHUP", s: syscall.SIGHUP, exit: 129},
	{name: "SIGKILL, then skewtest clean", s: syscall.SIGKILL, clean: true},
	// The closed output is the run's interrupt (SIGHUP's exit) once the
	// run has logged into it; a run that logged nothing meanwhile (a
	// quiet poll) takes the SIGINT first (its exit). Either way the
	// SIGINT is the user's first signal and the teardown runs whole.
	{name: "stderr closed, then SIGINT", s: syscall.SIGINT, exit: 129, orExit: 130, closePipe: true},
}

// interrupt is one planned run.
type interrupt struct {
	n     int
	phase phase
	sig   sig
	delay time.Duration
}

func (i interrupt) String() string {
	return fmt.Sprintf("run %d: %s %s into %s", i.n, i.sig.name, i.delay.Round(time.Millisecond), i.phase.name)
}

// plan is runs interrupts from seed. Run i meets phase i mod len(phases)
// and a signal that shifts once per round of phases, so that any
// len(phases)*len(signals) consecutive runs meet every pair, and 20 meet
// every phase at least 3 times and every signal at least 3; the seed
// shuffles their order and draws the delays.
func plan(seed uint64, runs int) []interrupt {
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	out := make([]interrupt, runs)
	for i := range out {
		p := phases[i%len(phases)]
		s := signals[(i+i/len(phases))%len(signals)]
		out[i] = interrupt{phase: p, sig: s, delay: time.Duration(r.Int64N(int64(p.maxDelay) + 1))}
	}
	r.Shuffle(len(out), func(a, b int) { out[a], out[b] = out[b], out[a] })
	for i := range out {
		out[i].n = i + 1
	}
	return out
}
