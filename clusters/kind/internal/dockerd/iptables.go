package dockerd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec" // this host's iptables tools, which dockerd changed
	"strings"

	"sigs.k8s.io/skewtest/clusters/internal/iptables"
)

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

// dockerOwner is what of the tables a private dockerd makes: chains
// named DOCKER*, docker's rules in chains it did not make (isDockerRule,
// with subnets those of its new bridges), and built-in chains' policies
// (FORWARD, which dockerd sets to DROP when it turns on IP forwarding).
func dockerOwner(subnets []netip.Prefix) iptables.Owner {
	return iptables.Owner{
		Chain:    isDockerChain,
		Rule:     func(r string) bool { return isDockerRule(r, subnets) },
		Policies: true,
	}
}

// restorePlan is iptables.RestorePlan for what dockerd changed.
func restorePlan(before, after *iptables.Ruleset, subnets []netip.Prefix) []iptables.Command {
	return iptables.RestorePlan(before, after, dockerOwner(subnets))
}

// saveIptables returns the output of <bin>-save for each of
// iptables.Tools that exists on the host.
func saveIptables(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for _, bin := range iptables.Tools {
		if _, err := exec.LookPath(bin); err != nil {
			continue
		}
		text, err := iptables.SaveText(ctx, bin)
		if err != nil {
			return nil, err
		}
		out[bin] = text
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
	for _, bin := range iptables.Tools {
		text, ok := saved[bin]
		if !ok {
			continue
		}
		before, err := iptables.Parse(text)
		if err != nil {
			errs = append(errs, fmt.Errorf("recorded %s state: %w", bin, err))
			continue
		}
		after, err := iptables.Save(ctx, bin)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		plan := restorePlan(before, after, subnets)
		t.log.Debug("restore iptables", "tool", bin, "commands", len(plan))
		if err := iptables.Apply(ctx, bin, plan); err != nil {
			errs = append(errs, err)
		}
	}
	return joinErrs(errs)
}
