#!/usr/bin/env bash
# Installs tau2rl's binaries, systemd units, service user, directories and
# example configs on a host, or into a staging root (--destdir) for packaging
# and for the tests in deploy/deploytest.
#
#   make build && sudo deploy/scripts/install.sh --bin bin
#   deploy/scripts/install.sh --bin bin --destdir /tmp/root     # staging, no systemctl
#
# What goes where:
#   /usr/local/bin/tau2-*                          the binaries found in --bin
#   /etc/systemd/system/                           deploy/systemd/*.service, tau2rl.target
#   /etc/systemd/system/<unit>.d/                  nothing (drop-in examples go to the share dir)
#   /usr/lib/sysusers.d/tau2rl.conf                the tau2rl system user
#   /usr/lib/tmpfiles.d/tau2rl.conf                /etc/tau2rl (0750 root:tau2rl), secrets.env (0600), /var/lib/tau2rl
#   /usr/local/share/tau2rl/config-examples/       deploy/config/ (copy the ones you need to /etc/tau2rl)
#   /usr/local/share/tau2rl/systemd-examples/      deploy/systemd/examples (drop-ins)
#   /usr/local/share/tau2rl/monitoring/            deploy/monitoring (Prometheus, alerts, Grafana)
#   /usr/local/share/doc/tau2rl/OPERATIONS.md      docs/OPERATIONS.md
# It never overwrites /etc/tau2rl/*.yaml or secrets.env, and never enables or
# starts a unit: that is the operator's decision (docs/OPERATIONS.md).
#
# Then it applies sysusers and tmpfiles (with --root when staging) and, on a
# live system, runs systemctl daemon-reload.
set -euo pipefail

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

bin=""
destdir=""
while (($#)); do
  case "$1" in
    --bin) bin="${2:?--bin needs a directory}"; shift 2 ;;
    --bin=*) bin="${1#*=}"; shift ;;
    --destdir) destdir="${2:?--destdir needs a directory}"; shift 2 ;;
    --destdir=*) destdir="${1#*=}"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "install.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

repo="$(cd "$(dirname "$0")/../.." && pwd)"
if [[ -n "$destdir" ]]; then
  destdir="$(mkdir -p "$destdir" && cd "$destdir" && pwd)"
elif [[ $(id -u) -ne 0 ]]; then
  echo "install.sh: installing on this host needs root (or stage with --destdir DIR)" >&2
  exit 1
fi
root="${destdir:-}"

if [[ -n "$bin" ]]; then
  shopt -s nullglob
  bins=("$bin"/tau2-*)
  shopt -u nullglob
  if ((${#bins[@]} == 0)); then
    echo "install.sh: no tau2-* binaries in $bin (run make build first)" >&2
    exit 1
  fi
  install -d -m 0755 "$root/usr/local/bin"
  install -m 0755 "${bins[@]}" "$root/usr/local/bin/"
fi

install -d -m 0755 "$root/etc/systemd/system" "$root/usr/lib/sysusers.d" "$root/usr/lib/tmpfiles.d" \
  "$root/usr/local/share/tau2rl/config-examples" "$root/usr/local/share/tau2rl/systemd-examples" \
  "$root/usr/local/share/tau2rl/monitoring" "$root/usr/local/share/doc/tau2rl"
install -m 0644 "$repo"/deploy/systemd/*.service "$repo"/deploy/systemd/*.target "$root/etc/systemd/system/"
install -m 0644 "$repo/deploy/systemd/tau2rl.sysusers.conf" "$root/usr/lib/sysusers.d/tau2rl.conf"
install -m 0644 "$repo/deploy/systemd/tau2rl.tmpfiles.conf" "$root/usr/lib/tmpfiles.d/tau2rl.conf"
cp -R "$repo/deploy/config/." "$root/usr/local/share/tau2rl/config-examples/"
cp -R "$repo/deploy/systemd/examples/." "$root/usr/local/share/tau2rl/systemd-examples/"
cp -R "$repo/deploy/monitoring/." "$root/usr/local/share/tau2rl/monitoring/"
install -m 0644 "$repo/docs/OPERATIONS.md" "$root/usr/local/share/doc/tau2rl/OPERATIONS.md"

if [[ -n "$destdir" ]]; then
  systemd-sysusers --root="$root" tau2rl.conf
  if [[ $(id -u) -eq 0 ]]; then
    systemd-tmpfiles --root="$root" --create tau2rl.conf
  elif ! systemd-tmpfiles --root="$root" --create tau2rl.conf 2>/dev/null; then
    # Without root the files and modes are created but chown fails: fine for a staging root.
    echo "install.sh: staged as $(id -un): directories and modes created, owners not set" >&2
  fi
else
  systemd-sysusers tau2rl.conf
  systemd-tmpfiles --create tau2rl.conf
  systemctl daemon-reload
fi
echo "install.sh: installed into ${destdir:-/}; next: copy configs from /usr/local/share/tau2rl/config-examples to /etc/tau2rl and enable the units (docs/OPERATIONS.md)"
