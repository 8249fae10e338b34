package mountinfo

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Lines taken from real tables (a kind node, a host with a CSI driver),
// with a few made-up edge cases.
const (
	lineRoot      = `27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard`
	lineShared    = `29 27 0:26 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw`
	lineOptionals = `612 29 0:52 / /var/lib/kubelet/pods/0f1c/volumes/kubernetes.io~projected/kube-api-access-x rw,relatime shared:311 master:12 propagate_from:3 unbindable - tmpfs tmpfs rw,size=3964576k,inode64`
	lineEscaped   = `700 27 254:0 /srv/local\040pv/a\134b /var/lib/my\040kubelet/pods/u1/volumes/kubernetes.io~local-volume/pv\0112 rw,relatime - ext4 /dev/disk\040one rw`
	lineNewline   = `701 27 0:60 / /mnt/x\012y rw - fuse.sshfs user@host:/a\040b rw,user_id=0`
	lineEmptySrc  = `702 27 0:61 / /mnt/empty rw - tmpfs  rw`
	lineDeleted   = `703 27 254:0 /tmp/gone\040(deleted) /mnt/file rw - ext4 /dev/vda rw`
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []Mount
		wantErr string // substring; "" means no error
	}{
		{
			name: "root, no optional fields",
			in:   lineRoot + "\n",
			want: []Mount{{ID: 27, ParentID: 1, MajorMinor: "254:0", Root: "/", MountPoint: "/", Options: "rw,relatime", FSType: "ext4", Source: "/dev/vda", SuperOptions: "rw,discard"}},
		},
		{
			name: "one optional field",
			in:   lineShared,
			want: []Mount{{ID: 29, ParentID: 27, MajorMinor: "0:26", Root: "/", MountPoint: "/sys", Options: "rw,nosuid,nodev,noexec,relatime", Optional: []string{"shared:7"}, FSType: "sysfs", Source: "sysfs", SuperOptions: "rw"}},
		},
		{
			name: "several optional fields",
			in:   lineOptionals,
			want: []Mount{{ID: 612, ParentID: 29, MajorMinor: "0:52", Root: "/", MountPoint: "/var/lib/kubelet/pods/0f1c/volumes/kubernetes.io~projected/kube-api-access-x", Options: "rw,relatime", Optional: []string{"shared:311", "master:12", "propagate_from:3", "unbindable"}, FSType: "tmpfs", Source: "tmpfs", SuperOptions: "rw,size=3964576k,inode64"}},
		},
		{
			name: "escaped space, tab and backslash in root, mount point and source",
			in:   lineEscaped,
			want: []Mount{{ID: 700, ParentID: 27, MajorMinor: "254:0", Root: `/srv/local pv/a\b`, MountPoint: "/var/lib/my kubelet/pods/u1/volumes/kubernetes.io~local-volume/pv\t2", Options: "rw,relatime", FSType: "ext4", Source: "/dev/disk one", SuperOptions: "rw"}},
		},
		{
			name: "escaped newline, fuse subtype",
			in:   lineNewline,
			want: []Mount{{ID: 701, ParentID: 27, MajorMinor: "0:60", Root: "/", MountPoint: "/mnt/x\ny", Options: "rw", FSType: "fuse.sshfs", Source: "user@host:/a b", SuperOptions: "rw,user_id=0"}},
		},
		{
			name: "empty source",
			in:   lineEmptySrc,
			want: []Mount{{ID: 702, ParentID: 27, MajorMinor: "0:61", Root: "/", MountPoint: "/mnt/empty", Options: "rw", FSType: "tmpfs", Source: "", SuperOptions: "rw"}},
		},
		{
			name: "deleted root",
			in:   lineDeleted,
			want: []Mount{{ID: 703, ParentID: 27, MajorMinor: "254:0", Root: "/tmp/gone (deleted)", MountPoint: "/mnt/file", Options: "rw", FSType: "ext4", Source: "/dev/vda", SuperOptions: "rw"}},
		},
		{
			name: "several lines and blank lines",
			in:   lineRoot + "\n\n" + lineShared + "\n",
			want: []Mount{
				{ID: 27, ParentID: 1, MajorMinor: "254:0", Root: "/", MountPoint: "/", Options: "rw,relatime", FSType: "ext4", Source: "/dev/vda", SuperOptions: "rw,discard"},
				{ID: 29, ParentID: 27, MajorMinor: "0:26", Root: "/", MountPoint: "/sys", Options: "rw,nosuid,nodev,noexec,relatime", Optional: []string{"shared:7"}, FSType: "sysfs", Source: "sysfs", SuperOptions: "rw"},
			},
		},
		{name: "empty input", in: "", want: nil},
		{name: "malformed: no separator", in: lineRoot + "\n" + `28 27 0:5 / /dev rw,nosuid ext4 /dev/vda rw` + "\n", wantErr: "line 2"},
		{name: "malformed: truncated after separator", in: lineRoot + "\n" + lineShared + "\n" + `30 27 0:5 / /dev rw - devtmpfs` + "\n", wantErr: "line 3"},
		{name: "malformed: bad ID", in: `x 1 254:0 / / rw - ext4 /dev/vda rw`, wantErr: "line 1: bad mount ID"},
		{name: "malformed: bad major:minor", in: `27 1 254 / / rw - ext4 /dev/vda rw`, wantErr: "major:minor"},
		{name: "malformed: relative mount point", in: `27 1 254:0 / mnt rw - ext4 /dev/vda rw`, wantErr: "not absolute"},
		{name: "malformed: extra field after separator", in: `27 1 254:0 / / rw - ext4 /dev/vda rw extra`, wantErr: "3 fields after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse() error = %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse() =\n%#v\nwant\n%#v", got, tt.want)
			}
		})
	}
}

func TestUnescapeEscape(t *testing.T) {
	tests := []struct{ escaped, plain string }{
		{`/a\040b`, "/a b"},
		{`\011\012\134`, "\t\n\\"},
		{`/plain`, "/plain"},
		{`/var/lib/kubelet\040root/pods`, "/var/lib/kubelet root/pods"},
	}
	for _, tt := range tests {
		if got := Unescape(tt.escaped); got != tt.plain {
			t.Errorf("Unescape(%q) = %q, want %q", tt.escaped, got, tt.plain)
		}
		if got := Escape(tt.plain); got != tt.escaped {
			t.Errorf("Escape(%q) = %q, want %q", tt.plain, got, tt.escaped)
		}
	}
	// Not escapes: kept as written.
	for _, s := range []string{`\`, `a\04`, `a\x41`, `\777`, `\08`} {
		if got := Unescape(s); got != s {
			t.Errorf("Unescape(%q) = %q, want it unchanged", s, got)
		}
	}
}

func TestUnderCountAt(t *testing.T) {
	mk := func(mps ...string) []Mount {
		var ms []Mount
		for i, mp := range mps {
			ms = append(ms, Mount{ID: i + 1, MountPoint: mp})
		}
		return ms
	}
	mounts := mk("/", "/a", "/a/b", "/a/bc", "/a/b/c/d", "/a/b", "/x/a/b", "/a b/c")
	points := func(ms []Mount) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.MountPoint)
		}
		return out
	}
	tests := []struct {
		dir  string
		want []string
	}{
		{"/a/b", []string{"/a/b", "/a/b/c/d", "/a/b"}},
		{"/a/b/", []string{"/a/b", "/a/b/c/d", "/a/b"}},
		{"/a/b/c", []string{"/a/b/c/d"}},
		{"/a", []string{"/a", "/a/b", "/a/bc", "/a/b/c/d", "/a/b"}},
		{"/a b", []string{"/a b/c"}},
		{"/nothing", nil},
		{"/", []string{"/", "/a", "/a/b", "/a/bc", "/a/b/c/d", "/a/b", "/x/a/b", "/a b/c"}},
	}
	for _, tt := range tests {
		if got := points(Under(mounts, tt.dir)); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Under(%q) = %q, want %q", tt.dir, got, tt.want)
		}
	}
	counts := map[string]int{"/a/b": 2, "/a/b/": 2, "/a/bc": 1, "/a/b/c": 0, "/": 1, "/a b/c": 1}
	for p, want := range counts {
		if got := CountAt(mounts, p); got != want {
			t.Errorf("CountAt(%q) = %d, want %d", p, got, want)
		}
		if got := IsMountPoint(mounts, p); got != (want > 0) {
			t.Errorf("IsMountPoint(%q) = %v, want %v", p, got, want > 0)
		}
	}
}

func TestParseFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(p, []byte(lineRoot+"\n"+lineOptionals+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ms, err := ParseFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[1].ID != 612 || len(ms[1].Optional) != 4 {
		t.Fatalf("ParseFile() = %+v", ms)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(bad, []byte(lineRoot+"\ngarbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseFile(bad); err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), bad) {
		t.Fatalf("ParseFile(bad) error = %v, want the path and line 2", err)
	}
	if _, err := ParseFile(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("ParseFile(missing) succeeded")
	}
}

// The live table of this process must parse: it is what the node readers
// feed Parse.
func TestParseSelf(t *testing.T) {
	ms, err := ParseFile("/proc/self/mountinfo")
	if err != nil {
		if os.IsNotExist(err) {
			t.Skip("no /proc/self/mountinfo on this system")
		}
		t.Fatal(err)
	}
	if !IsMountPoint(ms, "/") {
		t.Errorf("/ is not a mount point in /proc/self/mountinfo: %+v", ms)
	}
}
