package iptables

import (
	"strings"
	"testing"
)

// The local provider's kubelets add KUBE-* chains and jumps into them;
// its teardown records only the chain names before (ChainSets). The plan
// deletes the jumps into the new chains from chains that stay, flushes
// and deletes the new chains, and leaves alone a KUBE-* chain that was
// there before, the jump into it, someone else's new chain and rule, and
// every policy.
func TestRestorePlanOfKubeletChains(t *testing.T) {
	before := ChainsOnly("iptables", []string{
		"iptables|filter|INPUT", "iptables|filter|FORWARD", "iptables|filter|OUTPUT", "iptables|filter|KUBE-FIREWALL",
		"ip6tables|filter|KUBE-KUBELET-CANARY", // another tool's: not this plan's
	})
	after, err := Parse(`*filter
:INPUT DROP [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-FIREWALL - [0:0]
:KUBE-KUBELET-CANARY - [0:0]
:OTHER-APP - [0:0]
-A INPUT -j KUBE-FIREWALL
-A OUTPUT -j KUBE-KUBELET-CANARY
-A OUTPUT -m comment --comment "kubelet canary" -j KUBE-KUBELET-CANARY
-A INPUT -j OTHER-APP
-A KUBE-KUBELET-CANARY -j RETURN
COMMIT
*mangle
:PREROUTING ACCEPT [0:0]
:KUBE-IPTABLES-HINT - [0:0]
COMMIT
`)
	if err != nil {
		t.Fatal(err)
	}
	own := Owner{Chain: func(c string) bool { return strings.HasPrefix(c, "KUBE-") }}
	var got []string
	for _, c := range RestorePlan(before, after, own) {
		got = append(got, strings.Join(c, " "))
	}
	want := []string{
		"-t filter -D OUTPUT -j KUBE-KUBELET-CANARY",
		`-t filter -D OUTPUT -m comment --comment kubelet canary -j KUBE-KUBELET-CANARY`,
		"-t filter -F KUBE-KUBELET-CANARY",
		"-t mangle -F KUBE-IPTABLES-HINT",
		"-t filter -X KUBE-KUBELET-CANARY",
		"-t mangle -X KUBE-IPTABLES-HINT",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("plan:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if plan := RestorePlan(after, after, own); len(plan) != 0 {
		t.Errorf("nothing new, yet a plan: %v", plan)
	}
}
