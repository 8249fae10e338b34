package dockerd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"

	"sigs.k8s.io/skewtest/clusters/internal/iptables"
)

// iptablesBinaries are the tools whose tables Start records and Stop
// restores. Docker 20.10 touches ip6tables only with --ip6tables, but
// checking costs nothing.
var iptablesBinaries = []string{"iptables", "ip6tables"}

// ruleset is the parsed output of iptables-save.
type ruleset struct {
	tables map[string]*table
	order  []string // table names as they appear
}

type table struct {
	name string
	// policies maps every chain to its policy ("-" for user chains).
	policies map[string]string
	chains   []string // in order of appearance
	rules    []string // "-A CHAIN ..." lines, in order
}

// parseSave parses iptables-save output; counters ("[0:0]", -c) are
// dropped so that two saves compare by content.
func parseSave(text string) (*ruleset, error) {
	rs := &ruleset{tables: map[string]*table{}}
	var cur *table
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			name := line[1:]
			cur = rs.tables[name]
			if cur == nil {
				cur = &table{name: name, policies: map[string]string{}}
				rs.tables[name] = cur
				rs.order = append(rs.order, name)
			}
		case line == "COMMIT":
			cur = nil
		case cur == nil:
			return nil, fmt.Errorf("iptables-save line %d outside a table: %q", n+1, line)
		case strings.HasPrefix(line, ":"):
			f := strings.Fields(line[1:])
			if len(f) < 2 {
				return nil, fmt.Errorf("iptables-save line %d: bad chain line %q", n+1, line)
			}
			if _, ok := cur.policies[f[0]]; !ok {
				cur.chains = append(cur.chains, f[0])
			}
			cur.policies[f[0]] = f[1]
		case strings.HasPrefix(line, "-A "):
			cur.rules = append(cur.rules, line)
		case strings.HasPrefix(line, "[") && strings.Contains(line, "] -A "):
			// iptables-save -c: "[pkts:bytes] -A ...".
			cur.rules = append(cur.rules, line[strings.Index(line, "] -A ")+2:])
		default:
			return nil, fmt.Errorf("iptables-save line %d: unexpected %q", n+1, line)
		}
	}
	return rs, nil
}

// ruleChain returns the chain of a "-A CHAIN ..." line.
func ruleChain(rule string) string {
	f := strings.Fields(rule)
	if len(f) < 2 {
		return ""
	}
	return f[1]
}

// isDockerChain reports whether a chain name is one docker creates
// (DOCKER, DOCKER-USER, DOCKER-ISOLATION-STAGE-1, -2, DOCKER-INGRESS).
func isDockerChain(name string) bool {
	return name == "DOCKER" || strings.HasPrefix(name, "DOCKER-")
}

// isDockerInterface reports whether an interface name is one of docker's
// bridges: docker0 and br-<network id>.
func isDockerInterface(name string) bool {
	return name == "docker0" || strings.HasPrefix(name, "br-")
}

// isDockerRule reports whether a rule jumps to a docker chain, matches on
// a docker bridge, or matches a source or destination inside a docker
// bridge's subnet: the rules docker puts into chains it did not create
// (FORWARD, PREROUTING, OUTPUT, POSTROUTING MASQUERADE, including the
// hairpin MASQUERADE of a published port).
func isDockerRule(rule string, subnets []netip.Prefix) bool {
	args, err := iptables.SplitRule(rule)
	if err != nil {
		return false
	}
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "-j", "--jump", "-g", "--goto":
			if isDockerChain(args[i+1]) {
				return true
			}
		case "-i", "--in-interface", "-o", "--out-interface":
			if isDockerInterface(args[i+1]) {
				return true
			}
		case "-s", "--source", "-d", "--destination":
			if inSubnets(args[i+1], subnets) {
				return true
			}
		}
	}
	return false
}

// inSubnets reports whether an address or prefix (as iptables-save writes
// them: 172.17.0.3/32) lies inside one of subnets.
func inSubnets(s string, subnets []netip.Prefix) bool {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return false
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	for _, n := range subnets {
		if n.Bits() <= p.Bits() && n.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// bridgeSubnets returns the subnets of the given interfaces, from
// `ip -j addr show`.
func bridgeSubnets(ctx context.Context, names map[string]bool) ([]netip.Prefix, error) {
	if len(names) == 0 {
		return nil, nil
	}
	out, err := exec.CommandContext(ctx, "ip", "-j", "addr", "show").Output()
	if err != nil {
		return nil, fmt.Errorf("ip -j addr show: %w%s", err, stderrOf(err))
	}
	var ifs []struct {
		Name  string `json:"ifname"`
		Addrs []struct {
			Local     string `json:"local"`
			PrefixLen int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal(out, &ifs); err != nil {
		return nil, fmt.Errorf("ip -j addr show: %w", err)
	}
	var subnets []netip.Prefix
	for _, i := range ifs {
		if !names[i.Name] {
			continue
		}
		for _, a := range i.Addrs {
			addr, err := netip.ParseAddr(a.Local)
			if err != nil || addr.IsLinkLocalUnicast() {
				continue
			}
			if p, err := addr.Prefix(a.PrefixLen); err == nil {
				subnets = append(subnets, p)
			}
		}
	}
	return subnets, nil
}

// iptablesCommand is one invocation of iptables: args after the binary.
type iptablesCommand []string

// restorePlan returns the commands that take the tables from after back to
// before as far as docker changed them: docker's rules (see isDockerRule)
// that were not there before are deleted, chains named DOCKER* that were
// not there before are flushed and deleted, and built-in chain policies
// (FORWARD, which docker sets to DROP when it turns on IP forwarding) are
// set back. Rules and chains of anyone else are left alone, even when new.
//
// subnets are those of docker's bridges that were not there before.
func restorePlan(before, after *ruleset, subnets []netip.Prefix) []iptablesCommand {
	var deletes, flushes, removes, policies []iptablesCommand
	for _, name := range after.order {
		a := after.tables[name]
		b := before.tables[name]
		if b == nil {
			b = &table{name: name, policies: map[string]string{}}
		}
		newChain := map[string]bool{}
		for _, c := range a.chains {
			if _, ok := b.policies[c]; !ok && isDockerChain(c) {
				newChain[c] = true
			}
		}
		had := map[string]int{}
		for _, r := range b.rules {
			had[r]++
		}
		for _, r := range a.rules {
			if had[r] > 0 {
				had[r]--
				continue
			}
			if newChain[ruleChain(r)] || !isDockerRule(r, subnets) {
				continue // flushed with its chain, or not docker's
			}
			args, err := iptables.SplitRule(r)
			if err != nil || len(args) < 2 {
				continue
			}
			args[0] = "-D"
			deletes = append(deletes, append(iptablesCommand{"-t", name}, args...))
		}
		for _, c := range a.chains {
			if newChain[c] {
				flushes = append(flushes, iptablesCommand{"-t", name, "-F", c})
				removes = append(removes, iptablesCommand{"-t", name, "-X", c})
			}
		}
		for _, c := range a.chains {
			was, ok := b.policies[c]
			now := a.policies[c]
			if ok && was != "-" && now != "-" && was != now {
				policies = append(policies, iptablesCommand{"-t", name, "-P", c, was})
			}
		}
	}
	// Rules jumping to docker's chains go first, then the chains' own
	// rules (which may jump to each other), then the chains.
	plan := append(deletes, flushes...)
	plan = append(plan, removes...)
	return append(plan, policies...)
}

// saveIptables returns the output of <bin>-save for each of
// iptablesBinaries that exists on the host.
func saveIptables(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for _, bin := range iptablesBinaries {
		if _, err := exec.LookPath(bin); err != nil {
			continue
		}
		if _, err := exec.LookPath(bin + "-save"); err != nil {
			return nil, fmt.Errorf("%s exists but %s-save does not", bin, bin)
		}
		b, err := exec.CommandContext(ctx, bin+"-save").Output()
		if err != nil {
			return nil, fmt.Errorf("%s-save: %w%s", bin, err, stderrOf(err))
		}
		out[bin] = string(b)
	}
	return out, nil
}

// restoreIptables takes each recorded table set back to its recorded state
// as far as docker changed it (see restorePlan).
func (t *teardown) restoreIptables(ctx context.Context, saved map[string]string) error {
	var errs []error
	bridges, err := t.newBridges(ctx)
	if err != nil {
		return err
	}
	subnets, err := bridgeSubnets(ctx, bridges)
	if err != nil {
		return err
	}
	for _, bin := range iptablesBinaries {
		text, ok := saved[bin]
		if !ok {
			continue
		}
		before, err := parseSave(text)
		if err != nil {
			errs = append(errs, fmt.Errorf("recorded %s state: %w", bin, err))
			continue
		}
		b, err := exec.CommandContext(ctx, bin+"-save").Output()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s-save: %w%s", bin, err, stderrOf(err)))
			continue
		}
		after, err := parseSave(string(b))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s-save: %w", bin, err))
			continue
		}
		for _, c := range restorePlan(before, after, subnets) {
			t.log.Debug("restore iptables", "cmd", bin+" "+strings.Join(c, " "))
			if out, err := exec.CommandContext(ctx, bin, c...).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %w: %s", bin, strings.Join(c, " "), err, strings.TrimSpace(string(out))))
			}
		}
	}
	return joinErrs(errs)
}
