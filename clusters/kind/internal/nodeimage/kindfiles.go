package nodeimage

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// KindVersion is the sigs.k8s.io/kind module whose images/base/files the
// node image carries; it must match go.mod (a unit test checks).
const KindVersion = "v0.33.0"

// installKindBase copies kind's images/base/files tree (from the kind
// module) into root with the modes the Dockerfile's COPY --chmod gives
// (scripts 0755, everything else 0644), then replays the Dockerfile's RUN
// steps that shape the file system.
func installKindBase(filesDir, root string) error {
	if _, err := os.Stat(filepath.Join(filesDir, "usr", "local", "bin", "entrypoint")); err != nil {
		return fmt.Errorf("kind's images/base/files not found in the module: %w", err)
	}
	err := filepath.WalkDir(filesDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(filesDir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = "/" + filepath.ToSlash(rel)
		if d.IsDir() {
			return mkdirIn(root, rel, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		return copyFileIn(root, rel, p, kindFileMode(rel))
	})
	if err != nil {
		return fmt.Errorf("copy kind base files: %w", err)
	}
	return dockerfileSteps(root)
}

// kindFileMode is the mode kind's base Dockerfile gives a file of
// images/base/files.
func kindFileMode(rel string) os.FileMode {
	if strings.HasPrefix(rel, "/usr/local/bin/") || strings.HasPrefix(rel, "/kind/bin/") {
		return 0o755
	}
	return 0o644
}

// Units kind's base image enables, and the one it masks.
var (
	enabledUnits = []string{"kubelet.service", "containerd.service", "undo-mount-hacks.service"}
	maskedUnits  = []string{"systemd-binfmt.service"}
)

// dockerfileSteps replays the RUN steps of kind's images/base/Dockerfile
// that change the file system (package installation is debootstrap's job):
// trim systemd to what a node needs, make /sbin/init, enable and mask
// units, make /etc/kubernetes/manifests.
func dockerfileSteps(root string) error {
	for _, d := range []string{"/kind", "/kind/bin"} {
		host, err := resolveIn(root, d, true)
		if err != nil {
			return err
		}
		if err := os.Chmod(host, 0o755); err != nil {
			return err
		}
	}
	for _, g := range []string{
		"/lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service",
		"/lib/systemd/system/multi-user.target.wants/*",
		"/lib/systemd/system/local-fs.target.wants/*",
		"/lib/systemd/system/sockets.target.wants/*udev*",
		"/lib/systemd/system/sockets.target.wants/*initctl*",
		"/lib/systemd/system/basic.target.wants/*",
	} {
		if err := removeGlobIn(root, g); err != nil {
			return err
		}
	}
	// rm -f /etc/systemd/system/*.wants/*
	etcSystemd, err := resolveIn(root, "/etc/systemd/system", true)
	if err != nil {
		return err
	}
	wants, _ := filepath.Glob(filepath.Join(etcSystemd, "*.wants"))
	for _, w := range wants {
		if err := removeGlobIn(root, path.Join("/etc/systemd/system", filepath.Base(w), "*")); err != nil {
			return err
		}
	}
	journald, err := resolveIn(root, "/etc/systemd/journald.conf", true)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(journald, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString("ReadKMsg=no\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := symlinkIn(root, "/sbin/init", "/usr/lib/systemd/systemd"); err != nil {
		return err
	}
	for _, u := range enabledUnits {
		if err := enableUnit(root, u); err != nil {
			return err
		}
	}
	for _, u := range maskedUnits {
		if err := symlinkIn(root, "/etc/systemd/system/"+u, "/dev/null"); err != nil {
			return err
		}
	}
	return mkdirIn(root, "/etc/kubernetes/manifests", 0o755)
}

// enableUnit does what `systemctl enable` does for a unit in
// /etc/systemd/system: a symlink in each WantedBy target's .wants dir.
func enableUnit(root, unit string) error {
	unitPath := "/etc/systemd/system/" + unit
	host, err := resolveIn(root, unitPath, true)
	if err != nil {
		return err
	}
	text, err := os.ReadFile(host)
	if err != nil {
		return fmt.Errorf("enable %s: %w", unit, err)
	}
	targets := wantedBy(string(text))
	if len(targets) == 0 {
		return fmt.Errorf("enable %s: no WantedBy= in its [Install] section", unit)
	}
	for _, t := range targets {
		if err := symlinkIn(root, path.Join("/etc/systemd/system", t+".wants", unit), unitPath); err != nil {
			return err
		}
	}
	return nil
}

// wantedBy returns the WantedBy= targets of a unit file's [Install]
// section.
func wantedBy(unit string) []string {
	var out []string
	section := ""
	sc := bufio.NewScanner(strings.NewReader(unit))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = line
			continue
		}
		if section != "[Install]" {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok && strings.TrimSpace(k) == "WantedBy" {
			out = append(out, strings.Fields(v)...)
		}
	}
	return out
}
