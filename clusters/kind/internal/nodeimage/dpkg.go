package nodeimage

import (
	"archive/tar"
	"bufio"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// dpkgPackage is one installed package of a dpkg status file.
type dpkgPackage struct {
	Name, Arch string
	// Depends holds Pre-Depends and Depends, each a list of alternatives.
	Depends  [][]string
	Provides []string
}

// parseDpkgStatus returns the installed packages of /var/lib/dpkg/status.
func parseDpkgStatus(text string) map[string]dpkgPackage {
	pkgs := map[string]dpkgPackage{}
	for _, stanza := range strings.Split(text, "\n\n") {
		var p dpkgPackage
		installed := false
		sc := bufio.NewScanner(strings.NewReader(stanza))
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") {
				continue
			}
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			v = strings.TrimSpace(v)
			switch k {
			case "Package":
				p.Name = v
			case "Architecture":
				p.Arch = v
			case "Status":
				installed = strings.HasSuffix(v, " installed")
			case "Depends", "Pre-Depends":
				p.Depends = append(p.Depends, parseDepends(v)...)
			case "Provides":
				for _, alt := range parseDepends(v) {
					p.Provides = append(p.Provides, alt...)
				}
			}
		}
		if p.Name != "" && installed {
			pkgs[p.Name] = p
		}
	}
	return pkgs
}

// parseDepends parses "a (>= 1), b | c:any" into [[a] [b c]].
func parseDepends(v string) [][]string {
	var out [][]string
	for _, dep := range strings.Split(v, ",") {
		var alts []string
		for _, alt := range strings.Split(dep, "|") {
			f := strings.Fields(alt)
			if len(f) == 0 {
				continue
			}
			n, _, _ := strings.Cut(f[0], ":")
			n, _, _ = strings.Cut(n, "(")
			if n != "" {
				alts = append(alts, n)
			}
		}
		if len(alts) > 0 {
			out = append(out, alts)
		}
	}
	return out
}

// dependencyClosure returns roots and every installed package they depend
// on, sorted. For each dependency the first installed alternative (or a
// package providing it) is taken.
func dependencyClosure(pkgs map[string]dpkgPackage, roots []string) ([]string, error) {
	providers := map[string]string{}
	for _, p := range pkgs {
		for _, v := range p.Provides {
			if _, ok := providers[v]; !ok {
				providers[v] = p.Name
			}
		}
	}
	pick := func(alts []string) string {
		for _, a := range alts {
			if _, ok := pkgs[a]; ok {
				return a
			}
		}
		for _, a := range alts {
			if p, ok := providers[a]; ok {
				return p
			}
		}
		return ""
	}
	seen := map[string]bool{}
	queue := []string{}
	for _, r := range roots {
		if _, ok := pkgs[r]; !ok {
			return nil, fmt.Errorf("package %s is not installed in the rootfs", r)
		}
		queue = append(queue, r)
	}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if seen[n] {
			continue
		}
		seen[n] = true
		for _, alts := range pkgs[n].Depends {
			if p := pick(alts); p != "" && !seen[p] {
				queue = append(queue, p)
			}
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// skipInLayer are paths not worth carrying into an image.
var skipInLayer = []string{"/usr/share/doc/", "/usr/share/man/", "/usr/share/info/", "/usr/share/locale/", "/usr/share/lintian/", "/usr/share/bug/"}

// dpkgLayer returns a layer holding the files of roots and their
// dependencies, as installed in rootfs: regular files and symlinks at their
// resolved locations (so merged /usr is kept), their parent directories,
// the top-level merged-/usr symlinks (/bin, /lib, ...) and the
// /etc/alternatives links that lead to included files.
func dpkgLayer(rootfs string, roots []string) ([]layerEntry, error) {
	status, err := os.ReadFile(filepath.Join(rootfs, "var", "lib", "dpkg", "status"))
	if err != nil {
		return nil, err
	}
	pkgs := parseDpkgStatus(string(status))
	closure, err := dependencyClosure(pkgs, roots)
	if err != nil {
		return nil, err
	}
	entries := map[string]layerEntry{}
	add := func(p string) error {
		parent, err := resolveIn(rootfs, path.Dir(p), true)
		if err != nil {
			return err
		}
		host := filepath.Join(parent, path.Base(p))
		fi, err := os.Lstat(host)
		if err != nil {
			return nil // listed but gone (e.g. a diverted file)
		}
		rel, err := filepath.Rel(rootfs, host)
		if err != nil || strings.HasPrefix(rel, "..") {
			return fmt.Errorf("%s resolves outside the rootfs", p)
		}
		rel = filepath.ToSlash(rel)
		switch {
		case fi.Mode().IsRegular():
			entries[rel] = layerEntry{Name: rel, Type: tar.TypeReg, Mode: int64(fi.Mode().Perm()), Src: host}
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(host)
			if err != nil {
				return err
			}
			entries[rel] = layerEntry{Name: rel, Type: tar.TypeSymlink, Mode: 0o777, Link: target}
		}
		return nil
	}
	for _, pkg := range closure {
		list, err := dpkgList(rootfs, pkgs[pkg])
		if err != nil {
			return nil, err
		}
	files:
		for _, p := range list {
			for _, s := range skipInLayer {
				if strings.HasPrefix(p, s) {
					continue files
				}
			}
			if p == "/." || p == "" {
				continue
			}
			if err := add(p); err != nil {
				return nil, err
			}
		}
	}
	// Alternatives (made by maintainer scripts, so in no .list): a link in
	// a bin dir -> /etc/alternatives/x -> an included file.
	for _, binDir := range []string{"/usr/sbin", "/usr/bin"} {
		dir, err := resolveIn(rootfs, binDir, true)
		if err != nil {
			return nil, err
		}
		des, _ := os.ReadDir(dir)
		for _, de := range des {
			if de.Type()&os.ModeSymlink == 0 {
				continue
			}
			target, err := os.Readlink(filepath.Join(dir, de.Name()))
			if err != nil || !strings.HasPrefix(target, "/etc/alternatives/") {
				continue
			}
			final, err := resolveIn(rootfs, target, true)
			if err != nil {
				continue
			}
			rel, _ := filepath.Rel(rootfs, final)
			if _, ok := entries[filepath.ToSlash(rel)]; !ok {
				continue
			}
			if err := add(path.Join(binDir, de.Name())); err != nil {
				return nil, err
			}
			if err := add(target); err != nil {
				return nil, err
			}
		}
	}
	// Top-level merged-/usr symlinks.
	for _, top := range []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"} {
		if fi, err := os.Lstat(filepath.Join(rootfs, top)); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			if err := add("/" + top); err != nil {
				return nil, err
			}
		}
	}
	// Parent directories, with the rootfs's modes.
	for name := range entries {
		for d := path.Dir(name); d != "." && d != "/"; d = path.Dir(d) {
			if _, ok := entries[d]; ok {
				continue
			}
			mode := int64(0o755)
			if fi, err := os.Lstat(filepath.Join(rootfs, d)); err == nil {
				mode = int64(fi.Mode().Perm())
			}
			entries[d] = layerEntry{Name: d, Type: tar.TypeDir, Mode: mode}
		}
	}
	out := make([]layerEntry, 0, len(entries))
	for _, e := range entries {
		out = append(out, e)
	}
	sortEntries(out)
	return out, nil
}

// dpkgList returns the paths dpkg recorded for pkg.
func dpkgList(rootfs string, pkg dpkgPackage) ([]string, error) {
	info := filepath.Join(rootfs, "var", "lib", "dpkg", "info")
	var b []byte
	var err error
	for _, n := range []string{pkg.Name + ":" + pkg.Arch + ".list", pkg.Name + ".list"} {
		if b, err = os.ReadFile(filepath.Join(info, n)); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("no dpkg file list for %s: %w", pkg.Name, err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n"), nil
}
