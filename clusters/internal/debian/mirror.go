package debian

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Mirror finds the Debian archive URI serving suite's main component in
// the host's apt sources (one-line sources.list files and deb822 .sources
// files) under aptDir.
func Mirror(aptDir, suite string) (string, error) {
	files := []string{filepath.Join(aptDir, "sources.list")}
	for _, pattern := range []string{"*.list", "*.sources"} {
		m, _ := filepath.Glob(filepath.Join(aptDir, "sources.list.d", pattern))
		sort.Strings(m)
		files = append(files, m...)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var uri string
		if strings.HasSuffix(f, ".sources") {
			uri = mirrorFromDeb822(string(b), suite)
		} else {
			uri = mirrorFromList(string(b), suite)
		}
		if uri != "" {
			return uri, nil
		}
	}
	return "", fmt.Errorf("no Debian mirror for %s main in %s/sources.list(.d)", suite, aptDir)
}

// mirrorFromList reads one-line-style entries: "deb [opts] URI SUITE COMP...".
func mirrorFromList(text, suite string) string {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.Index(line, "#"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		f := strings.Fields(line)
		if len(f) < 4 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") {
			for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
				f = f[1:]
			}
			if len(f) == 0 {
				continue
			}
			f = f[1:]
		}
		if len(f) >= 3 && f[1] == suite && slices.Contains(f[2:], "main") {
			return f[0]
		}
	}
	return ""
}

// mirrorFromDeb822 reads deb822 stanzas (Types/URIs/Suites/Components).
func mirrorFromDeb822(text, suite string) string {
	for _, stanza := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n\n") {
		fields := map[string][]string{}
		for _, line := range strings.Split(stanza, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			k, v, ok := strings.Cut(line, ":")
			if !ok || strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") {
				continue
			}
			fields[strings.ToLower(strings.TrimSpace(k))] = strings.Fields(v)
		}
		if strings.EqualFold(strings.Join(fields["enabled"], ""), "no") {
			continue
		}
		if !slices.Contains(fields["types"], "deb") || !slices.Contains(fields["suites"], suite) || !slices.Contains(fields["components"], "main") {
			continue
		}
		if len(fields["uris"]) > 0 {
			return fields["uris"][0]
		}
	}
	return ""
}
