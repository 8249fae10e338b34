#!/usr/bin/env bash
# Installs what skewtest's tests need on a Debian/Ubuntu host: the host
# programs the local provider runs (etcd, runc, CNI plugins, iptables), sshd
# for the existing provider's tests, Docker and debootstrap for the kind
# provider, qemu and e2fsprogs (mkfs.ext4 -d) for make test-hosts' guest
# and busybox-static for the workload image of its kops-style node,
# Chromium for the sign-off page's browser test, curl and util-linux's
# setpriv for the spec that probes a cluster as user nobody, shellcheck for
# make lint, git for the patch: kubelet source (git apply), and the Go
# modules. Kubernetes components and containerd are
# built from Go modules on first use and cached under $HOME/.cache/skewtest,
# not installed here.
set -euo pipefail

packages=(etcd-server runc containernetworking-plugins openssh-server iptables iproute2 util-linux mount findutils procps curl docker.io debootstrap qemu-system-x86 qemu-utils e2fsprogs busybox-static chromium shellcheck git)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps: missing packages: ${missing[*]}; run as root or: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "install-deps: installing ${missing[*]}"
  # Packages like etcd-server and docker.io start system services where
  # they can; skewtest runs its own on free ports and sockets, so none may
  # start (policy-rc.d exit 101 = action forbidden).
  added_policy=
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && added_policy=1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  [[ -n $added_policy ]] && rm -f /usr/sbin/policy-rc.d
fi
cd "$(dirname "$0")/.."
go mod download
echo "install-deps: ok"
