package iptables

import (
	"reflect"
	"testing"
)

func TestSplitRule(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{`-A FORWARD -i docker0 ! -o docker0 -j ACCEPT`, []string{"-A", "FORWARD", "-i", "docker0", "!", "-o", "docker0", "-j", "ACCEPT"}},
		{`-A X -m comment --comment "a \"b\" c" -j RETURN`, []string{"-A", "X", "-m", "comment", "--comment", `a "b" c`, "-j", "RETURN"}},
		{`-A X  -j   RETURN `, []string{"-A", "X", "-j", "RETURN"}},
		{`-A X -m comment --comment ""`, []string{"-A", "X", "-m", "comment", "--comment", ""}},
		// As the local provider's teardown reads them, after "-A ".
		{`INPUT -j KUBE-FIREWALL`, []string{"INPUT", "-j", "KUBE-FIREWALL"}},
		{`KUBE-FIREWALL ! -s 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -j DROP`,
			[]string{"KUBE-FIREWALL", "!", "-s", "127.0.0.0/8", "-m", "comment", "--comment", "block incoming localnet connections", "-j", "DROP"}},
		{`X -m comment --comment "a \"quoted\" word" -j Y`, []string{"X", "-m", "comment", "--comment", `a "quoted" word`, "-j", "Y"}},
		{`X --comment ""`, []string{"X", "--comment", ""}},
	} {
		got, err := SplitRule(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("SplitRule(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := SplitRule(`-A X --comment "open`); err == nil {
		t.Errorf("SplitRule accepted an unterminated quote")
	}
}
