// Package iptables reads what iptables-save prints, for the teardowns that
// remove the rules and chains skewtest's clusters (the local provider's
// kube-proxy and CNI, the kind provider's private dockerd) added.
package iptables

import (
	"fmt"
	"strings"
)

// SplitRule splits an iptables-save rule line into arguments: words
// separated by blanks, with double-quoted words (comments) unquoted and
// backslash escapes inside quotes undone.
func SplitRule(line string) ([]string, error) {
	var args []string
	var cur strings.Builder
	inWord, inQuote := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case inQuote && c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
		case inQuote && c == '"':
			inQuote = false
		case inQuote:
			cur.WriteByte(c)
		case c == '"':
			inQuote, inWord = true, true
		case c == ' ' || c == '\t':
			if inWord {
				args = append(args, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inQuote {
		return nil, fmt.Errorf("unterminated quote in %q", line)
	}
	if inWord {
		args = append(args, cur.String())
	}
	return args, nil
}
