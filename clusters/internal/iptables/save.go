package iptables

import (
	"context"
	"errors"
	"fmt"
	"os/exec" // this host's iptables-save, reading the tables every node shares
	"strings"
)

// Tools are the iptables front ends whose tables skewtest's clusters
// change: the kubelet and Docker touch both address families.
var Tools = []string{"iptables", "ip6tables"}

// Ruleset is the parsed output of one iptables-save.
type Ruleset struct {
	Tables map[string]*Table
	Order  []string // table names as they appear
}

// Table is one table of a Ruleset.
type Table struct {
	Name string
	// Policies maps every chain to its policy ("-" for user chains).
	Policies map[string]string
	Chains   []string // in order of appearance
	Rules    []string // "-A CHAIN ..." lines, in order, without counters
}

// BuiltinPolicy is the policy of every built-in chain of a table the kernel
// has just made: a table that iptables-save does not print (nothing has
// used it since boot) has its built-in chains at ACCEPT.
const BuiltinPolicy = "ACCEPT"

// Parse parses iptables-save output; counters ("[0:0]", -c) are dropped so
// that two saves compare by content.
func Parse(text string) (*Ruleset, error) {
	rs := &Ruleset{Tables: map[string]*Table{}}
	var cur *Table
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			name := line[1:]
			cur = rs.Tables[name]
			if cur == nil {
				cur = &Table{Name: name, Policies: map[string]string{}}
				rs.Tables[name] = cur
				rs.Order = append(rs.Order, name)
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
			if _, ok := cur.Policies[f[0]]; !ok {
				cur.Chains = append(cur.Chains, f[0])
			}
			cur.Policies[f[0]] = f[1]
		case strings.HasPrefix(line, "-A "):
			cur.Rules = append(cur.Rules, line)
		case strings.HasPrefix(line, "[") && strings.Contains(line, "] -A "):
			// iptables-save -c: "[pkts:bytes] -A ...".
			cur.Rules = append(cur.Rules, line[strings.Index(line, "] -A ")+2:])
		default:
			return nil, fmt.Errorf("iptables-save line %d: unexpected %q", n+1, line)
		}
	}
	return rs, nil
}

// ErrNoTool is returned by Save for a tool that is not installed.
var ErrNoTool = errors.New("not installed")

// SaveText runs <tool>-save and returns what it prints.
func SaveText(ctx context.Context, tool string) (string, error) {
	if _, err := exec.LookPath(tool + "-save"); err != nil {
		return "", fmt.Errorf("%s-save: %w", tool, ErrNoTool)
	}
	b, err := exec.CommandContext(ctx, tool+"-save").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			return "", fmt.Errorf("%s-save: %w: %s", tool, err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("%s-save: %w", tool, err)
	}
	return string(b), nil
}

// Save runs <tool>-save and parses it.
func Save(ctx context.Context, tool string) (*Ruleset, error) {
	text, err := SaveText(ctx, tool)
	if err != nil {
		return nil, err
	}
	rs, err := Parse(text)
	if err != nil {
		return nil, fmt.Errorf("%s-save: %w", tool, err)
	}
	return rs, nil
}

// RuleChain returns the chain of a "-A CHAIN ..." line.
func RuleChain(rule string) string {
	f := strings.Fields(rule)
	if len(f) < 2 {
		return ""
	}
	return f[1]
}

// Jumps returns the chains a rule jumps or goes to (-j, --jump, -g, --goto).
func Jumps(args []string) []string {
	var out []string
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "-j", "--jump", "-g", "--goto":
			out = append(out, args[i+1])
		}
	}
	return out
}
