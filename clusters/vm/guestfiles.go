package vm

// The files Up's guest needs besides Debian's packages. They are part of
// the image's cache key: changing one rebuilds the image.

// bootTag is the 9p tag of the per-instance share holding the SSH keys and
// the list of the other shares; the guest mounts it before sshd starts.
const bootTag = "skewtest-boot"

// guestBootDir is where the guest mounts the boot share.
const guestBootDir = "/run/skewtest/boot"

// Files in the boot share.
const (
	bootHostKey        = "ssh_host_ed25519_key"
	bootAuthorizedKeys = "authorized_keys"
	bootShares         = "shares"
)

// ninePOptions are the mount options of every 9p share: virtio transport,
// the Linux dialect, and a larger message size than the 8 KiB default,
// which makes reading binaries from the cache several times faster.
const ninePOptions = "trans=virtio,version=9p2000.L,msize=524288"

// setupScript runs before sshd (skewtest-vm-setup.service): it installs the
// instance's SSH host key and the client's public key from the boot share
// and mounts the other shares at their host paths. The shares file has one
// "TAG PATH ro|rw" line per share.
const setupScript = `#!/bin/sh
set -eu
modprobe -a 9pnet_virtio 9p
mkdir -p ` + guestBootDir + `
mount -t 9p -o ro,` + ninePOptions + ` ` + bootTag + ` ` + guestBootDir + `
install -m 600 ` + guestBootDir + `/` + bootHostKey + ` /etc/ssh/ssh_host_ed25519_key
install -d -m 700 /root/.ssh
install -m 600 ` + guestBootDir + `/` + bootAuthorizedKeys + ` /root/.ssh/authorized_keys
while read -r tag path mode; do
	[ -n "$tag" ] || continue
	mkdir -p "$path"
	mount -t 9p -o "$mode,` + ninePOptions + `" "$tag" "$path"
	echo "skewtest-vm-setup: mounted $tag at $path ($mode)"
done < ` + guestBootDir + `/` + bootShares + `
`

const setupUnit = `[Unit]
Description=skewtest VM: SSH keys and 9p shares from the host
DefaultDependencies=no
After=local-fs.target systemd-modules-load.service
Before=ssh.service sysinit.target
Wants=local-fs.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/skewtest-vm-setup
StandardOutput=journal+console

[Install]
WantedBy=sysinit.target
`

// sshdConfig: keys only, root by key, the one host key the setup service
// installs, and no reverse DNS lookup (there is no DNS).
const sshdConfig = `HostKey /etc/ssh/ssh_host_ed25519_key
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UseDNS no
MaxSessions 32
`

// networkConfig: DHCP on the user-mode network's one interface.
const networkConfig = `[Match]
Name=en* eth*

[Network]
DHCP=ipv4
`

const fstab = `/dev/vda / ext4 rw,errors=remount-ro 0 1
`

const hosts = `127.0.0.1 localhost
127.0.1.1 ` + Hostname + `
`

// guestFiles are written into the rootfs (path, mode, content).
var guestFiles = []struct {
	path    string
	mode    uint32
	content string
}{
	{"/usr/local/sbin/skewtest-vm-setup", 0o755, setupScript},
	{"/etc/systemd/system/skewtest-vm-setup.service", 0o644, setupUnit},
	{"/etc/ssh/sshd_config.d/skewtest.conf", 0o644, sshdConfig},
	{"/etc/systemd/network/10-skewtest.network", 0o644, networkConfig},
	{"/etc/fstab", 0o644, fstab},
	{"/etc/hostname", 0o644, Hostname + "\n"},
	{"/etc/hosts", 0o644, hosts},
}

// enabledUnits are enabled in the image.
var enabledUnits = []string{"skewtest-vm-setup.service", "systemd-networkd.service", "ssh.service"}

// maskedUnits would spend the guest's CPU on nothing a test needs (timers),
// or take what the local provider starts itself (etcd-server's etcd on
// port 2379).
var maskedUnits = []string{"etcd.service", "apt-daily.timer", "apt-daily-upgrade.timer", "e2scrub_all.timer",
	"fstrim.timer", "man-db.timer", "dpkg-db-backup.timer", "systemd-tmpfiles-clean.timer", "getty@tty1.service"}
