package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Error is a failed operation on one cgroup.
type Error struct {
	Op   string // "create", "enable memory in", ...
	Path string // the cgroup's directory
	Err  error
	// Hint says what to change on the host, when known.
	Hint string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("cgroup: %s %s: %v", e.Op, e.Path, e.Err)
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// The cgroup v2 controllers a local node needs. The kubelet checks that its
// cgroup root has cpu, cpuset, memory, pids and, when the kernel has it,
// hugetlb in cgroup.controllers (and says "cgroup-root doesn't exist"
// otherwise); runc sets io limits when the kernel has io, so it is enabled
// where it is available and not required.
var (
	requiredControllers = []string{"cpu", "cpuset", "memory", "pids"}
	kernelControllers   = []string{"hugetlb"} // required when the kernel has it
	optionalControllers = []string{"io"}
)

// Tree is the cgroup v2 hierarchy mounted at Dir: Mount on a unified host,
// Mount+"/unified" on a hybrid one, a temporary directory in tests.
type Tree struct{ Dir string }

// UnifiedTree is the cgroup v2 hierarchy of a unified host.
var UnifiedTree = Tree{Dir: Mount}

// Path is the directory of the cgroup rel ("/skewtest-1a2b/daemons").
func (t Tree) Path(rel string) string { return filepath.Join(t.Dir, rel) }

func (t Tree) available() ([]string, error) {
	return readList(filepath.Join(t.Dir, "cgroup.controllers"))
}

// Controllers are the controllers a node's cgroup root gets: the required
// ones (an error names any the kernel lacks), and those of hugetlb and io
// the kernel has.
func (t Tree) Controllers() (required, optional []string, err error) {
	avail, err := t.available()
	if err != nil {
		return nil, nil, &Error{Op: "read controllers of", Path: t.Dir, Err: err, Hint: "is cgroup2 mounted there?"}
	}
	var missing []string
	for _, c := range requiredControllers {
		if !slices.Contains(avail, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return nil, nil, &Error{Op: "find controllers in", Path: t.Dir, Err: fmt.Errorf("the kernel has no %s controller", strings.Join(missing, ", ")),
			Hint: "the kubelet needs " + strings.Join(requiredControllers, ", ") + "; boot a kernel with them, without cgroup_disable="}
	}
	required = slices.Clone(requiredControllers)
	for _, c := range kernelControllers {
		if slices.Contains(avail, c) {
			required = append(required, c)
		}
	}
	for _, c := range optionalControllers {
		if slices.Contains(avail, c) {
			optional = append(optional, c)
		}
	}
	return required, optional, nil
}

// MakeRoot creates the cgroup rel and any missing cgroup above it, and
// enables the node controllers (Controllers) in cgroup.subtree_control of
// the top of the tree, of every cgroup down to rel, and of rel itself, so
// that rel has them and so have the cgroups the kubelet makes below it
// (kubepods). cgroup v2 refuses to enable controllers below a cgroup that
// holds processes (the top excepted): no cgroup on the way may hold any,
// and the error names the one that does.
func (t Tree) MakeRoot(rel string) error {
	required, optional, err := t.Controllers()
	if err != nil {
		return err
	}
	dir := t.Dir
	if err := enable(dir, required, optional); err != nil {
		return err
	}
	for _, part := range splitRel(rel) {
		dir = filepath.Join(dir, part)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return &Error{Op: "create", Path: dir, Err: err}
		}
		if err := fillCpuset(dir); err != nil {
			return err
		}
		if err := enable(dir, required, optional); err != nil {
			return err
		}
	}
	have, err := readList(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return &Error{Op: "read controllers of", Path: dir, Err: err}
	}
	var missing []string
	for _, c := range required {
		if !slices.Contains(have, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return &Error{Op: "check", Path: dir, Err: fmt.Errorf("controllers %s are not enabled for it", strings.Join(missing, ", ")),
			Hint: "the kubelet refuses a cgroup root without them; enable them in cgroup.subtree_control of every cgroup above it"}
	}
	return nil
}

// Mkdir creates the cgroup rel (a leaf for processes) and any missing
// cgroup above it.
func (t Tree) Mkdir(rel string) error {
	dir := t.Dir
	for _, part := range splitRel(rel) {
		dir = filepath.Join(dir, part)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return &Error{Op: "create", Path: dir, Err: err}
		}
	}
	return nil
}

// Move moves process pid (all its threads) into the cgroup rel.
func (t Tree) Move(rel string, pid int) error {
	if err := os.WriteFile(filepath.Join(t.Path(rel), "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return &Error{Op: "move pid " + strconv.Itoa(pid) + " into", Path: t.Path(rel), Err: err}
	}
	return nil
}

// enable turns the controllers on in dir's cgroup.subtree_control: all at
// once, else one by one so the error names the one refused. A required
// one refused is an error; an optional one is left off.
func enable(dir string, required, optional []string) error {
	file := filepath.Join(dir, "cgroup.subtree_control")
	on, err := readList(file)
	if err != nil {
		return &Error{Op: "read subtree_control of", Path: dir, Err: err}
	}
	var want []string
	for _, c := range append(slices.Clone(required), optional...) {
		if !slices.Contains(on, c) {
			want = append(want, "+"+c)
		}
	}
	if len(want) == 0 {
		return nil
	}
	if os.WriteFile(file, []byte(strings.Join(want, " ")), 0o644) == nil {
		return nil
	}
	for _, w := range want {
		err := os.WriteFile(file, []byte(w), 0o644)
		if err == nil || !slices.Contains(required, w[1:]) {
			continue
		}
		e := &Error{Op: "enable " + w[1:] + " in", Path: dir, Err: err}
		if errors.Is(err, unix.EBUSY) {
			e.Hint = "processes live in this cgroup, and cgroup v2 lets only cgroups without controllers enabled below them hold processes; move them into a child cgroup"
		} else if errors.Is(err, unix.ENOENT) {
			e.Hint = "the cgroup above does not pass " + w[1:] + " down"
		}
		return e
	}
	return nil
}

// fillCpuset gives dir its parent's CPUs and memory nodes if its effective
// ones are empty: a cgroup with no CPUs can run nothing (runc's writes to
// cgroup.procs fail with ENOSPC). cgroup v2 normally inherits them; an
// empty cpuset.cpus.effective comes from a parent made by hand or a
// cpuset partition.
func fillCpuset(dir string) error {
	for _, f := range []string{"cpus", "mems"} {
		eff, err := os.ReadFile(filepath.Join(dir, "cpuset."+f+".effective"))
		if err != nil || strings.TrimSpace(string(eff)) != "" {
			continue
		}
		parent, err := os.ReadFile(filepath.Join(filepath.Dir(dir), "cpuset."+f+".effective"))
		if err != nil || strings.TrimSpace(string(parent)) == "" {
			return &Error{Op: "give CPUs and memory nodes to", Path: dir, Err: fmt.Errorf("cpuset.%s.effective is empty here and above", f)}
		}
		if err := os.WriteFile(filepath.Join(dir, "cpuset."+f), parent, 0o644); err != nil {
			return &Error{Op: "write cpuset." + f + " of", Path: dir, Err: err}
		}
	}
	return nil
}

func readList(file string) ([]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(b)), nil
}

func splitRel(rel string) []string {
	var parts []string
	for _, p := range strings.Split(rel, "/") {
		if p != "" && p != "." {
			parts = append(parts, p)
		}
	}
	return parts
}

// SubtreeControls are the controllers enabled in cgroup.subtree_control of
// the top and of every existing cgroup from it down to rel, keyed by
// cgroup ("/", "/system.slice", ...): what MakeRoot may change in cgroups
// a run did not make, for Restore to undo.
func (t Tree) SubtreeControls(rel string) (map[string][]string, error) {
	out := map[string][]string{}
	cur := "/"
	parts := splitRel(rel)
	for i := 0; ; i++ {
		on, err := readList(filepath.Join(t.Path(cur), "cgroup.subtree_control"))
		if errors.Is(err, fs.ErrNotExist) && cur != "/" {
			break
		}
		if err != nil {
			return nil, &Error{Op: "read subtree_control of", Path: t.Path(cur), Err: err}
		}
		out[cur] = on
		if i == len(parts) {
			break
		}
		cur = "/" + strings.Join(parts[:i+1], "/")
	}
	return out, nil
}

// Restore turns off, deepest cgroup first, the controllers enabled in
// cgroup.subtree_control since SubtreeControls recorded before. A
// controller another cgroup below still uses stays on (the kernel refuses
// with EBUSY): it is someone else's now. A cgroup gone is skipped.
func (t Tree) Restore(before map[string][]string) error {
	keys := make([]string, 0, len(before))
	for k := range before {
		keys = append(keys, k)
	}
	// Deepest first: a parent cannot turn off what a child passes down.
	slices.SortFunc(keys, func(a, b string) int { return len(splitRel(b)) - len(splitRel(a)) })
	var errs []error
	for _, k := range keys {
		file := filepath.Join(t.Path(k), "cgroup.subtree_control")
		on, err := readList(file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, &Error{Op: "read subtree_control of", Path: t.Path(k), Err: err})
			continue
		}
		var off []string
		for _, c := range on {
			if !slices.Contains(before[k], c) {
				off = append(off, "-"+c)
			}
		}
		if len(off) == 0 || os.WriteFile(file, []byte(strings.Join(off, " ")), 0o644) == nil {
			continue
		}
		for _, o := range off {
			if err := os.WriteFile(file, []byte(o), 0o644); err != nil && !errors.Is(err, unix.EBUSY) {
				errs = append(errs, &Error{Op: "turn " + o[1:] + " off again in", Path: t.Path(k), Err: err})
			}
		}
	}
	return errors.Join(errs...)
}
