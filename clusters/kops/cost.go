package kops

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/skewtest/reports"
)

// onDemandUSDPerHour are approximate Linux on-demand prices in us-east-1
// (2025), for the report's estimate only; other regions differ by up to
// about a third. A type not listed is reported without a price.
var onDemandUSDPerHour = map[string]float64{
	"c5.large": 0.085, "c5.xlarge": 0.17, "m5.large": 0.096, "m6i.large": 0.096, "m7i.large": 0.1008,
	"t3.medium": 0.0416, "t3.large": 0.0832, "t3a.medium": 0.0376, "c6i.large": 0.085, "m6g.large": 0.077,
}

// Other costs of a round, per hour: gp3 root volumes (USD 0.08 per
// GiB-month), the API server's network load balancer, and the NAT-free
// public IPv4 addresses (USD 0.005 an hour each).
const (
	gp3USDPerGiBHour = 0.08 / 730
	nlbUSDPerHour    = 0.0225
	ipv4USDPerHour   = 0.005
)

// estimate is the cost of instances (types) for d, with their root volumes,
// a load balancer and their public addresses; unknown lists types without
// a price.
func estimate(types []string, d time.Duration) (usd float64, unknown []string) {
	h := d.Hours()
	for _, t := range types {
		price, ok := onDemandUSDPerHour[t]
		if !ok {
			unknown = append(unknown, t)
		}
		usd += (price + defaultVolumeSize*gp3USDPerGiBHour + ipv4USDPerHour) * h
	}
	if len(types) > 0 {
		usd += nlbUSDPerHour * h
	}
	return usd, unknown
}

// RunFacts are the report's facts known after Down: instance types, the
// cluster's wall time and an estimate of its cost, the state store, and
// what the sweep found.
func (p *provider) RunFacts() []reports.KeyValue {
	st := p.snapshot()
	p.mu.Lock()
	sweep := slices.Clone(p.sweep)
	started := p.started
	ev := len(p.evidence)
	p.mu.Unlock()
	var out []reports.KeyValue
	add := func(k, v string) { out = append(out, reports.KeyValue{Key: k, Value: v}) }
	add("kops cluster", st.Cluster+" in "+st.Region)
	if len(st.Instances) > 0 {
		add("AWS instances", strings.Join(st.Instances, ", "))
	}
	if !started.IsZero() {
		wall := time.Since(started)
		usd, unknown := estimate(st.Instances, wall)
		est := fmt.Sprintf("USD %.2f for %s (on-demand us-east-1 prices; instances, gp3 root volumes, load balancer, public IPv4)", usd, wall.Round(time.Second))
		if len(unknown) > 0 {
			est += "; no price known for " + strings.Join(unknown, ", ")
		}
		add("AWS wall time and cost estimate", est)
	}
	add("kops state store", st.StateStore)
	if ev > 0 {
		add("EBS evidence", fmt.Sprintf("%d snapshots in logs/ebs-evidence.txt", ev))
	}
	switch {
	case len(sweep) == 0:
		add("Post-run sweep", "nothing carried the run's tags after Down")
	default:
		var names []string
		for _, r := range sweep {
			names = append(names, fmt.Sprintf("%s (deleted: %t)", r.Kind+" "+r.ID, r.Deleted))
		}
		add("Post-run sweep", "found after Down: "+strings.Join(names, ", "))
	}
	return out
}
