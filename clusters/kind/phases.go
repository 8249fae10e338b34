package kind

import (
	"log/slog"
	"time"
)

// phases times the steps of a bring-up or teardown one after another, so
// that its log line says where the time went (measurements.md has the
// figures).
type phases struct {
	start, last time.Time
	attrs       []any
}

func newPhases() *phases {
	now := time.Now()
	return &phases{start: now, last: now}
}

// done ends the step called name, begun where the last one ended.
func (ph *phases) done(name string) {
	now := time.Now()
	ph.attrs = append(ph.attrs, slog.Duration(name, now.Sub(ph.last).Round(10*time.Millisecond)))
	ph.last = now
}

// log logs msg with every step's time and the total, plus attrs.
func (ph *phases) log(l *slog.Logger, msg string, attrs ...any) {
	all := append(append(attrs, ph.attrs...), slog.Duration("took", time.Since(ph.start).Round(10*time.Millisecond)))
	l.Info(msg, all...)
}
