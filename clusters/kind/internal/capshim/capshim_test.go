package capshim

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

var allCaps = []string{"CAP_CHOWN", "CAP_SYS_ADMIN", "CAP_SYS_RESOURCE", "CAP_NET_ADMIN"}

func capsObject(extra map[string]any) map[string]any {
	c := map[string]any{}
	for _, s := range capSets {
		c[s] = allCaps
	}
	for k, v := range extra {
		c[k] = v
	}
	return c
}

func writeJSON(t *testing.T, path string, v any, mode os.FileMode) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // umask
		t.Fatal(err)
	}
}

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s after FilterSpec: %v", path, err)
	}
	return m
}

func TestFilterSpec(t *testing.T) {
	filtered := []any{"CAP_CHOWN", "CAP_SYS_ADMIN", "CAP_NET_ADMIN"}
	for _, tc := range []struct {
		name        string
		content     any    // marshalled into the file unless raw is set
		raw         string // written as is
		mode        os.FileMode
		wantChanged bool
		wantErr     string // substring; the file's path is always expected in it
		check       func(t *testing.T, got map[string]any)
	}{
		{
			name: "bundle config.json, cap in all five sets, unknown fields kept",
			content: map[string]any{
				"ociVersion": "1.0.2-dev",
				"process": map[string]any{
					"args":         []string{"/sbin/init"},
					"capabilities": capsObject(map[string]any{"x-future-set": []string{"CAP_SYS_RESOURCE"}}),
					"x-unknown":    map[string]any{"a": 1.5, "b": []any{true, nil}},
				},
				"root":          map[string]any{"path": "rootfs"},
				"linux":         map[string]any{"maskedPaths": []string{}, "x-private": "keep"},
				"x-top-unknown": 42,
			},
			mode:        0o600,
			wantChanged: true,
			check: func(t *testing.T, got map[string]any) {
				proc := got["process"].(map[string]any)
				caps := proc["capabilities"].(map[string]any)
				for _, s := range capSets {
					if !reflect.DeepEqual(caps[s], filtered) {
						t.Errorf("process.capabilities.%s = %v, want %v", s, caps[s], filtered)
					}
				}
				// A set the shim does not know is not touched.
				if !reflect.DeepEqual(caps["x-future-set"], []any{"CAP_SYS_RESOURCE"}) {
					t.Errorf("unknown capability set changed: %v", caps["x-future-set"])
				}
				if !reflect.DeepEqual(proc["x-unknown"], map[string]any{"a": 1.5, "b": []any{true, nil}}) {
					t.Errorf("process.x-unknown = %v", proc["x-unknown"])
				}
				if !reflect.DeepEqual(proc["args"], []any{"/sbin/init"}) {
					t.Errorf("process.args = %v", proc["args"])
				}
				if got["x-top-unknown"] != 42.0 || got["ociVersion"] != "1.0.2-dev" {
					t.Errorf("top-level fields lost: %v", got)
				}
				if got["linux"].(map[string]any)["x-private"] != "keep" {
					t.Errorf("linux.x-private lost: %v", got["linux"])
				}
			},
		},
		{
			name: "exec process.json, capabilities at the top level",
			content: map[string]any{
				"args":         []string{"sh", "-c", "true"},
				"cwd":          "/",
				"terminal":     false,
				"capabilities": capsObject(nil),
				"env":          []string{"A=B"},
			},
			mode:        0o644,
			wantChanged: true,
			check: func(t *testing.T, got map[string]any) {
				caps := got["capabilities"].(map[string]any)
				for _, s := range capSets {
					if !reflect.DeepEqual(caps[s], filtered) {
						t.Errorf("capabilities.%s = %v, want %v", s, caps[s], filtered)
					}
				}
				if !reflect.DeepEqual(got["env"], []any{"A=B"}) || got["cwd"] != "/" {
					t.Errorf("other fields changed: %v", got)
				}
			},
		},
		{
			name: "only some sets hold the cap, others null or missing",
			content: map[string]any{"process": map[string]any{"capabilities": map[string]any{
				"bounding":  allCaps,
				"effective": []string{"CAP_CHOWN"},
				"ambient":   nil,
			}}},
			mode:        0o640,
			wantChanged: true,
			check: func(t *testing.T, got map[string]any) {
				caps := got["process"].(map[string]any)["capabilities"].(map[string]any)
				if !reflect.DeepEqual(caps["bounding"], filtered) || !reflect.DeepEqual(caps["effective"], []any{"CAP_CHOWN"}) {
					t.Errorf("capabilities = %v", caps)
				}
				if v, ok := caps["ambient"]; !ok || v != nil {
					t.Errorf("ambient = %v (present %v), want null kept", v, ok)
				}
			},
		},
		{
			name:    "spec without capabilities",
			content: map[string]any{"ociVersion": "1.0.2", "process": map[string]any{"args": []string{"x"}}},
			mode:    0o644,
		},
		{
			name:    "capabilities without CAP_SYS_RESOURCE",
			content: map[string]any{"process": map[string]any{"capabilities": map[string]any{"bounding": []string{"CAP_CHOWN"}}}},
			mode:    0o644,
		},
		{
			name:    "invalid JSON",
			raw:     `{"process": {`,
			mode:    0o644,
			wantErr: "unexpected end of JSON input",
		},
		{
			name:    "capability set of the wrong type",
			content: map[string]any{"capabilities": map[string]any{"bounding": "CAP_SYS_RESOURCE"}},
			mode:    0o644,
			wantErr: "bounding",
		},
		{
			name:    "not an object",
			raw:     `null`,
			mode:    0o644,
			wantErr: "not a JSON object",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.json")
			if tc.raw != "" {
				if err := os.WriteFile(path, []byte(tc.raw), tc.mode); err != nil {
					t.Fatal(err)
				}
			} else {
				writeJSON(t, path, tc.content, tc.mode)
			}
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			changed, err := FilterSpec(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path) {
					t.Fatalf("FilterSpec = %v, want an error naming %s and containing %q", err, path, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("FilterSpec: %v", err)
			}
			if changed != tc.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tc.wantChanged)
			}
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !changed && string(after) != string(before) {
				t.Errorf("file rewritten although nothing changed:\n%s", after)
			}
			if changed && strings.Contains(string(after), Cap) && tc.check == nil {
				t.Errorf("%s still in the file", Cap)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != tc.mode {
				t.Errorf("mode = %v, want %v", fi.Mode().Perm(), tc.mode)
			}
			if tc.check != nil {
				tc.check(t, readJSON(t, path))
			}
			// Nothing else was left in the directory (temporary files).
			entries, _ := os.ReadDir(filepath.Dir(path))
			if len(entries) != 1 {
				t.Errorf("directory holds %d entries, want only config.json", len(entries))
			}
			// Filtering twice changes nothing more.
			if changed, err := FilterSpec(path); err != nil || changed {
				t.Errorf("second FilterSpec = %v, %v; want false, nil", changed, err)
			}
		})
	}
}

func TestFilterSpecMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope", "config.json")
	if _, err := FilterSpec(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("FilterSpec(missing) = %v, want an error naming %s", err, path)
	}
}

func TestSpecFile(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    string
		wantErr bool
	}{
		// As containerd's go-runc calls it.
		{args: []string{"--root", "/run/x/runc/moby", "--log", "/run/x/log.json", "--log-format", "json", "--systemd-cgroup", "create", "--bundle", "/b/1", "--pid-file", "/b/1/init.pid", "abc"}, want: "/b/1/config.json"},
		{args: []string{"--root=/r", "--debug", "create", "--bundle=/b/2", "abc"}, want: "/b/2/config.json"},
		{args: []string{"create", "-b", "/b/3", "abc"}, want: "/b/3/config.json"},
		{args: []string{"create", "-b=/b/4", "abc"}, want: "/b/4/config.json"},
		{args: []string{"-root", "/r", "create", "-bundle", "/b/5", "abc"}, want: "/b/5/config.json"},
		{args: []string{"create", "--pid-file", "--bundle", "--bundle", "/b/6", "abc"}, want: "/b/6/config.json"}, // --bundle is the pid file's name here
		{args: []string{"create", "--no-pivot", "--console-socket", "/s.sock", "--bundle", "b7", "abc"}, want: "b7/config.json"},
		{args: []string{"run", "--bundle", "/b/8", "--detach", "abc"}, want: "/b/8/config.json"},
		{args: []string{"restore", "--image-path", "/img", "-b", "/b/9", "abc"}, want: "/b/9/config.json"},
		{args: []string{"run", "abc"}, want: "config.json"},
		{args: []string{"--log-format", "json", "create", "abc", "--bundle", "/ignored"}, want: "config.json"}, // flags stop at the ID
		{args: []string{"--root", "/r", "--log", "/l", "exec", "--process", "/tmp/p.json", "--detach", "--pid-file", "/p.pid", "abc"}, want: "/tmp/p.json"},
		{args: []string{"exec", "-p", "/tmp/q.json", "abc"}, want: "/tmp/q.json"},
		{args: []string{"exec", "--process=/tmp/r.json", "abc"}, want: "/tmp/r.json"},
		{args: []string{"exec", "-t", "-e", "-p", "--cwd", "/", "abc", "ps", "-p", "1"}, want: ""}, // -p is the value of -e; the rest is the command
		{args: []string{"exec", "abc", "sh"}, want: ""},
		{args: []string{"--root", "/r", "start", "abc"}, want: ""},
		{args: []string{"--root", "/r", "delete", "--force", "abc"}, want: ""},
		{args: []string{"state", "abc"}, want: ""},
		{args: []string{"--version"}, want: ""},
		{args: []string{"features"}, want: ""},
		{args: nil, want: ""},
		{args: []string{"--root", "/r", "--", "create", "--bundle", "/b/10", "abc"}, want: "/b/10/config.json"},
		{args: []string{"--root"}, wantErr: true},
		{args: []string{"create", "--bundle"}, wantErr: true},
		{args: []string{"exec", "-p"}, wantErr: true},
	} {
		got, err := SpecFile(tc.args)
		if tc.wantErr {
			if err == nil {
				t.Errorf("SpecFile(%q) = %q, want an error", tc.args, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("SpecFile(%q) = %q, %v; want %q", tc.args, got, err, tc.want)
		}
	}
}

// writeSpecs writes a bundle config.json and an exec process file, both
// holding CAP_SYS_RESOURCE, into dir.
func writeSpecs(t *testing.T, dir string) (config, process string) {
	t.Helper()
	config = filepath.Join(dir, "config.json")
	process = filepath.Join(dir, "process.json")
	writeJSON(t, config, map[string]any{"process": map[string]any{"capabilities": capsObject(nil)}}, 0o644)
	writeJSON(t, process, map[string]any{"capabilities": capsObject(nil)}, 0o644)
	return config, process
}

func holdsCap(t *testing.T, path string) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(b), Cap)
}

func TestRewrite(t *testing.T) {
	for _, tc := range []struct {
		name        string
		args        func(config, process string) []string
		wantConfig  bool // config.json filtered
		wantProcess bool // process.json filtered
	}{
		{"create --bundle", func(c, p string) []string {
			return []string{"--root", "/r", "--log", "/l", "--log-format", "json", "--systemd-cgroup", "create", "--bundle", filepath.Dir(c), "--pid-file", "/x.pid", "id"}
		}, true, false},
		{"create --bundle=", func(c, p string) []string { return []string{"create", "--bundle=" + filepath.Dir(c), "id"} }, true, false},
		{"run -b", func(c, p string) []string { return []string{"run", "-b", filepath.Dir(c), "id"} }, true, false},
		{"exec --process", func(c, p string) []string {
			return []string{"--root", "/r", "exec", "--process", p, "--detach", "id"}
		}, false, true},
		{"exec -p", func(c, p string) []string { return []string{"exec", "-p", p, "id"} }, false, true},
		{"start", func(c, p string) []string { return []string{"--root", filepath.Dir(c), "start", "id"} }, false, false},
		{"kill", func(c, p string) []string { return []string{"kill", "id", "9"} }, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			config, process := writeSpecs(t, t.TempDir())
			if err := Rewrite(tc.args(config, process)); err != nil {
				t.Fatalf("Rewrite: %v", err)
			}
			if got := !holdsCap(t, config); got != tc.wantConfig {
				t.Errorf("config.json filtered = %v, want %v", got, tc.wantConfig)
			}
			if got := !holdsCap(t, process); got != tc.wantProcess {
				t.Errorf("process.json filtered = %v, want %v", got, tc.wantProcess)
			}
		})
	}
	t.Run("create of a bundle without config.json", func(t *testing.T) {
		dir := t.TempDir()
		if err := Rewrite([]string{"create", "--bundle", dir, "id"}); err == nil || !strings.Contains(err.Error(), dir) {
			t.Errorf("Rewrite = %v, want an error naming %s", err, dir)
		}
	})
}

// Not parallel: it changes the working directory.
func TestRewriteRunWithoutBundleUsesCwd(t *testing.T) {
	dir := t.TempDir()
	config, _ := writeSpecs(t, dir)
	t.Chdir(dir)
	if err := Rewrite([]string{"--root", "/r", "run", "--detach", "id"}); err != nil {
		t.Fatalf("Rewrite: %v", err)
	}
	if holdsCap(t, config) {
		t.Errorf("%s in the current directory was not filtered", config)
	}
}

func TestCapBnd(t *testing.T) {
	for _, tc := range []struct {
		status  string
		want    uint64
		wantErr bool
	}{
		{"Name:\tx\nCapBnd:\t000001ffffffffff\nCapAmb:\t0\n", 0x1ffffffffff, false},
		{"CapBnd:\t000001fffeffffff\n", 0x1fffeffffff, false},
		{"Name:\tx\n", 0, true},
		{"CapBnd:\tzz\n", 0, true},
	} {
		got, err := capBnd([]byte(tc.status))
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("capBnd(%q) = %x, %v; want %x, error %v", tc.status, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestNeedsShim(t *testing.T) {
	got, err := NeedsShim()
	if err != nil {
		t.Fatal(err)
	}
	// Parse /proc/self/status independently of capBnd.
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var want bool
	found := false
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "CapBnd:" {
			mask, err := strconv.ParseUint(f[1], 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			want = mask>>24&1 == 0
			found = true
		}
	}
	if !found {
		t.Fatal("no CapBnd in /proc/self/status")
	}
	if got != want {
		t.Fatalf("NeedsShim() = %v, /proc/self/status says %v", got, want)
	}
	t.Logf("NeedsShim() = %v on this host", got)
}

// TestShimCommand builds the shim and runs it against a stand-in runc that
// records its arguments: the spec is filtered and runc gets the same argv.
func TestShimCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the shim")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cache := t.TempDir()
	shim, err := Build(ctx, cache)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cache, "kind", BinaryName); shim != want {
		t.Errorf("Build = %s, want %s", shim, want)
	}
	fi, err := os.Stat(shim)
	if err != nil {
		t.Fatal(err)
	}
	// A second Build of the same source leaves the cached shim alone.
	if again, err := Build(ctx, cache); err != nil || again != shim {
		t.Fatalf("second Build = %s, %v", again, err)
	}
	if fi2, _ := os.Stat(shim); !fi2.ModTime().Equal(fi.ModTime()) {
		t.Errorf("second Build replaced a shim built from the same source")
	}
	// A shim cached by other source (here, other bytes) is replaced.
	if err := os.WriteFile(shim, []byte("#!/bin/sh\necho stale shim\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(ctx, cache); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(shim); bytes.Contains(b, []byte("stale shim")) || len(b) < 1<<20 {
		t.Errorf("Build kept a stale cached shim (%d bytes)", len(b))
	}

	dir := t.TempDir()
	record := filepath.Join(dir, "argv")
	fake := filepath.Join(dir, "fake-runc")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\nprintf '%s\\n' \"$0\" \"$@\" > "+record+"\nexit 7\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	config, process := writeSpecs(t, dir)

	run := func(env []string, args ...string) (int, string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, shim, args...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		code := 0
		if err != nil {
			ee, ok := err.(*exec.ExitError)
			if !ok {
				t.Fatalf("run shim: %v", err)
			}
			code = ee.ExitCode()
		}
		return code, string(out)
	}

	// Real runc from the environment.
	args := []string{"--root", "/r", "create", "--bundle", dir, "id"}
	if code, out := run([]string{"SKEWTEST_RUNC=" + fake}, args...); code != 7 {
		t.Fatalf("shim exit %d, want the stand-in's 7; output:\n%s", code, out)
	}
	if holdsCap(t, config) {
		t.Errorf("config.json not filtered")
	}
	got, _ := os.ReadFile(record)
	if want := strings.Join(append([]string{fake}, args...), "\n") + "\n"; string(got) != want {
		t.Errorf("runc got argv\n%s\nwant\n%s", got, want)
	}

	// Real runc from the sibling file, no environment.
	if err := os.WriteFile(shim+".runc", []byte(fake+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := run([]string{"SKEWTEST_RUNC="}, "exec", "-p", process, "id"); code != 7 {
		t.Fatalf("shim exit %d, want 7; output:\n%s", code, out)
	}
	if holdsCap(t, process) {
		t.Errorf("process.json not filtered")
	}

	// An invalid spec: runc is not run, the shim says why and exits 1.
	os.Remove(record)
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "config.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := run(nil, "create", "-b", bad, "id")
	if code != 1 || !strings.Contains(out, filepath.Join(bad, "config.json")) {
		t.Errorf("shim on a bad spec: exit %d, output %q; want 1 and the file named", code, out)
	}
	if _, err := os.Stat(record); err == nil {
		t.Errorf("runc was run despite the bad spec")
	}

	// Pointing the shim at itself is refused instead of looping.
	if code, out := run([]string{"SKEWTEST_RUNC=" + shim}, "state", "id"); code != 1 || !strings.Contains(out, "is this shim") {
		t.Errorf("shim as its own runc: exit %d, output %q", code, out)
	}
}
