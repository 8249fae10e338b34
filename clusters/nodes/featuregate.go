package nodes

import (
	"fmt"
	"regexp"
	"strings"
)

// RejectedFeatureGateError is a kubelet that refused to start because its
// configuration names a feature gate its version does not accept: one it
// does not know (never had, or removed), or one locked to its default
// (GA or deprecated) set the other way. Swapping binaries meets it when a
// configuration written for one version is given to another.
type RejectedFeatureGateError struct {
	Node, Version, Gate string
	// Line is the kubelet's own words.
	Line string
}

func (e *RejectedFeatureGateError) Error() string {
	return fmt.Sprintf("kubelet %s on %s rejects feature gate %s in its configuration (a gate that version does not know or has locked); remove or change the gate for that version. The kubelet said: %s", e.Version, e.Node, e.Gate, e.Line)
}

// The kubelet's words when it rejects a gate (k8s.io/component-base/featuregate).
var rejectedGate = []*regexp.Regexp{
	regexp.MustCompile(`unrecognized feature gate: ([A-Za-z0-9]+)`),
	regexp.MustCompile(`cannot set feature gate ([A-Za-z0-9]+) to`),
}

// maxGateLine bounds the quoted log line.
const maxGateLine = 400

// FindRejectedFeatureGate looks for the kubelet's rejection of a feature
// gate in its log, last line first: the gate and the line, ok false when
// it rejected none.
func FindRejectedFeatureGate(log string) (gate, line string, ok bool) {
	lines := strings.Split(log, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		for _, re := range rejectedGate {
			if m := re.FindStringSubmatch(lines[i]); m != nil {
				l := strings.TrimSpace(lines[i])
				if len(l) > maxGateLine {
					l = l[:maxGateLine] + "…"
				}
				return m[1], l, true
			}
		}
	}
	return "", "", false
}
