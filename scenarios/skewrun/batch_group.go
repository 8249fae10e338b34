package skewrun

import (
	"fmt"
	"slices"
	"sync"
)

// groups are the Job.Group values of a batch that a kubelet failure has
// stopped, across all its clusters: a group's jobs not yet started when
// one of them fails are not run.
type groups struct {
	mu      sync.Mutex
	stopped map[string]string
}

// stop stops j's group, if it has one, naming j as why.
func (g *groups) stop(j *batchJob) {
	if g == nil || j.job.Group == "" {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped == nil {
		g.stopped = map[string]string{}
	}
	if _, ok := g.stopped[j.job.Group]; !ok {
		g.stopped[j.job.Group] = fmt.Sprintf("not run: run %q of its group %s failed on a kubelet check first", j.job.Name, j.job.Group)
	}
}

// pending returns the jobs of queue whose group runs on, in order, and
// marks the others skipped.
func (g *groups) pending(queue []*batchJob) []*batchJob {
	out := slices.Clone(queue)
	if g == nil {
		return out
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.DeleteFunc(out, func(j *batchJob) bool {
		why, ok := g.stopped[j.job.Group]
		if !ok || j.job.Group == "" {
			return false
		}
		j.result.Skipped, j.record.Failure = why, why
		return true
	})
}
