// Package lines holds the one "last n lines" that errors quote from a
// command's output or a daemon's log.
package lines

import "strings"

// Last is the last n lines of s, without s's trailing newlines.
func Last(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}
