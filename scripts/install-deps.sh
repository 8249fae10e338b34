#!/usr/bin/env bash
# Installs what skewtest's tests need on a Debian/Ubuntu host: the host
# programs the local provider runs (etcd, runc, CNI plugins, iptables), sshd
# for the existing provider's tests, and the Go modules. Kubernetes
# components and containerd are built from Go modules on first use and
# cached under $HOME/.cache/skewtest, not installed here.
set -euo pipefail

packages=(etcd-server runc containernetworking-plugins openssh-server iptables iproute2 util-linux findutils procps)
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
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian's etcd-server package starts a system etcd where systemd runs;
# skewtest runs its own on a free port and does not need it.
cd "$(dirname "$0")/.."
go mod download
echo "install-deps: ok"
