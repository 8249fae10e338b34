package iptables

import (
	"context"
	"errors"
	"fmt"
	"os/exec" // this host's iptables tools, changing the tables every node shares
	"sort"
	"strings"
)

// Owner tells RestorePlan what of a table set a run made, so that it
// takes out exactly that: the kubelet's KUBE-* chains for the local
// provider, dockerd's DOCKER* chains and rules for kind's private daemon.
type Owner struct {
	// Chain reports whether a chain name is of the run's kind: such a
	// chain that was not there before is the run's.
	Chain func(name string) bool
	// Rule, when set, reports whether a rule that was not there before,
	// in a chain that is not the run's, is the run's all the same (a
	// jump into any of the run's chains always is).
	Rule func(rule string) bool
	// Policies sets built-in chains' policies back to what they were
	// (dockerd turns FORWARD to DROP).
	Policies bool
}

// Command is one invocation of an iptables tool: the arguments after it.
type Command []string

// RestorePlan returns the commands that take the tables from after back
// to before as far as own says the run changed them: its new rules in
// chains it keeps deleted, its new chains flushed and deleted, and, with
// own.Policies, built-in chain policies set back. Rules and chains of
// anyone else are left alone, even when new. The deletes come first, then
// the flushes (a chain's rules may jump to another of the run's), then
// the chains, then the policies.
func RestorePlan(before, after *Ruleset, own Owner) []Command {
	var deletes, flushes, removes, policies []Command
	for _, name := range after.Order {
		a := after.Tables[name]
		b := before.Tables[name]
		if b == nil {
			// A table iptables-save did not print did not exist yet: the
			// kernel makes it, with its built-in chains at ACCEPT, when
			// something first uses it. On a freshly booted host dockerd
			// is what makes the filter table and sets FORWARD to DROP, so
			// this is the policy to go back to.
			b = &Table{Name: name, Policies: map[string]string{}}
			for _, c := range a.Chains {
				if a.Policies[c] != "-" {
					b.Policies[c] = BuiltinPolicy
				}
			}
		}
		newChain := map[string]bool{}
		for _, c := range a.Chains {
			if _, ok := b.Policies[c]; !ok && own.Chain(c) {
				newChain[c] = true
			}
		}
		had := map[string]int{}
		for _, r := range b.Rules {
			had[r]++
		}
		for _, r := range a.Rules {
			if had[r] > 0 {
				had[r]--
				continue
			}
			if newChain[RuleChain(r)] {
				continue // flushed with its chain
			}
			// iptables-save writes no unterminated quote; a line with one
			// could not be replayed as a -D either.
			args, err := SplitRule(r)
			if err != nil || len(args) < 2 {
				continue
			}
			ours := own.Rule != nil && own.Rule(r)
			for _, j := range Jumps(args) {
				ours = ours || newChain[j]
			}
			if !ours {
				continue
			}
			args[0] = "-D"
			deletes = append(deletes, append(Command{"-t", name}, args...))
		}
		for _, c := range a.Chains {
			if newChain[c] {
				flushes = append(flushes, Command{"-t", name, "-F", c})
				removes = append(removes, Command{"-t", name, "-X", c})
			}
		}
		if !own.Policies {
			continue
		}
		for _, c := range a.Chains {
			was, ok := b.Policies[c]
			now := a.Policies[c]
			if ok && was != "-" && now != "-" && was != now {
				policies = append(policies, Command{"-t", name, "-P", c, was})
			}
		}
	}
	plan := append(deletes, flushes...)
	plan = append(plan, removes...)
	return append(plan, policies...)
}

// Apply runs plan with tool, waiting for the xtables lock (-w); every
// command runs, and the errors of those that failed are returned.
func Apply(ctx context.Context, tool string, plan []Command) error {
	var errs []error
	for _, c := range plan {
		args := append([]string{"-w"}, c...)
		if out, err := exec.CommandContext(ctx, tool, args...).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w: %s", tool, strings.Join(args, " "), err, strings.TrimSpace(string(out))))
		}
	}
	return errors.Join(errs...)
}

// ChainSets are the chains of each table of each tool, as
// "tool|table|chain" strings: what the local provider records before its
// kubelets run.
func ChainSets(ctx context.Context) []string {
	var out []string
	for _, tool := range Tools {
		rs, err := Save(ctx, tool)
		if err != nil {
			continue
		}
		for _, name := range rs.Order {
			for _, c := range rs.Tables[name].Chains {
				out = append(out, tool+"|"+name+"|"+c)
			}
		}
	}
	sort.Strings(out)
	return out
}

// ChainsOnly is the Ruleset of tool that ChainSets recorded: its chains,
// without rules or policies, enough for RestorePlan to tell new chains.
func ChainsOnly(tool string, chainSets []string) *Ruleset {
	rs := &Ruleset{Tables: map[string]*Table{}}
	for _, s := range chainSets {
		parts := strings.SplitN(s, "|", 3)
		if len(parts) != 3 || parts[0] != tool {
			continue
		}
		t := rs.Tables[parts[1]]
		if t == nil {
			t = &Table{Name: parts[1], Policies: map[string]string{}}
			rs.Tables[parts[1]] = t
			rs.Order = append(rs.Order, parts[1])
		}
		t.Chains = append(t.Chains, parts[2])
		t.Policies[parts[2]] = "-"
	}
	return rs
}
