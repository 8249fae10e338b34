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

func TestParse(t *testing.T) {
	for _, in := range []string{"-A X -j Y\n", "*filter\n:FORWARD\nCOMMIT\n", "*filter\nbogus\nCOMMIT\n"} {
		if _, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) accepted it", in)
		}
	}
	rs, err := Parse("# c\n*filter\n:FORWARD DROP [1:2]\n:KUBE-X - [0:0]\n[3:4] -A FORWARD -j KUBE-X\nCOMMIT\n*nat\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rs.Order, []string{"filter", "nat"}) {
		t.Errorf("Order = %q", rs.Order)
	}
	f := rs.Tables["filter"]
	if f.Policies["FORWARD"] != "DROP" || f.Policies["KUBE-X"] != "-" || !reflect.DeepEqual(f.Chains, []string{"FORWARD", "KUBE-X"}) ||
		!reflect.DeepEqual(f.Rules, []string{"-A FORWARD -j KUBE-X"}) {
		t.Errorf("filter = %+v", f)
	}
	args, _ := SplitRule(f.Rules[0])
	if got := Jumps(args); !reflect.DeepEqual(got, []string{"KUBE-X"}) || RuleChain(f.Rules[0]) != "FORWARD" {
		t.Errorf("Jumps = %q, RuleChain = %q", got, RuleChain(f.Rules[0]))
	}
}
