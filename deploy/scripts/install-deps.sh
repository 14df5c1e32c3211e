#!/usr/bin/env bash
# Installs, from Debian's packages, the system tools some of tau2rl's tests use:
#   kcat             an independent Kafka client (librdkafka): the Kafka interoperability test
#   promtool         (package prometheus) validates the Prometheus scrape config and alert rules
#   systemd-analyze  (package systemd) verifies the systemd units
#   node/npm         (package npm) run the Hugging Face tokenizer and chat-template oracles
#   bwrap, rg        (packages bubblewrap, ripgrep) banking_knowledge's terminal_use sandbox
# None is needed to build or run tau2rl. Without a tool its tests skip, saying so; CI sets
# TAU2RL_REQUIRE_TOOLS=1 (and TAU2RL_REQUIRE_ORACLE=1), which makes them fail instead.
#
#   install-deps.sh --check   say what is missing and why; install nothing (make test runs this)
#   install-deps.sh           the same, then ask before installing the missing ones (as root)
#   install-deps.sh --yes     install the missing ones without asking (CI: .ci/run)
#
# It installs only what is missing, and only as root; otherwise it prints the command to run.
set -euo pipefail
mode=ask
case "${1:-}" in
  --check) mode=check ;;
  --yes|-y) mode=yes ;;
  "") ;;
  -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
  *) echo "install-deps: unknown argument $1 (--check, --yes or none)" >&2; exit 2 ;;
esac
need=() why=()
missing() { need+=("$1"); why+=("  $1: $2"); }
command -v kcat >/dev/null || missing kcat "kcat, for the Kafka interoperability test (lib/stream/kafka)"
command -v promtool >/dev/null || missing prometheus "promtool, to validate the monitoring rules (deploy/deploytest)"
command -v systemd-analyze >/dev/null || missing systemd "systemd-analyze, to verify the systemd units (deploy/deploytest)"
command -v npm >/dev/null || missing npm "node and npm, for the Hugging Face tokenizer and chat-template oracles"
command -v bwrap >/dev/null || missing bubblewrap "bwrap, the sandbox of banking_knowledge's terminal_use shell tool (tau2/knowledge)"
command -v rg >/dev/null || missing ripgrep "rg, offered inside the terminal_use sandbox (tau2/knowledge)"
((${#need[@]})) || exit 0
{
  echo "install-deps: not installed (the tests that need them skip; make deps installs them):"
  printf '%s\n' "${why[@]}"
} >&2
case $mode in
  check) exit 0 ;;
  ask)
    if [[ $(id -u) -ne 0 ]]; then
      echo "install-deps: run as root: apt-get install ${need[*]}" >&2
      exit 0
    fi
    if [[ ! -t 0 ]]; then
      echo "install-deps: not installing without a terminal to ask on; run with --yes (make deps DEPS_ARGS=--yes)" >&2
      exit 0
    fi
    read -r -p "install-deps: apt-get install ${need[*]}? [y/N] " answer
    [[ $answer == [yY]* ]] || { echo "install-deps: nothing installed" >&2; exit 0; }
    ;;
  yes)
    if [[ $(id -u) -ne 0 ]]; then
      echo "install-deps: --yes needs root: sudo apt-get install ${need[*]}" >&2
      exit 1
    fi
    ;;
esac
echo "install-deps: apt-get install ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=300 update -qq >/dev/null
apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${need[@]}" >/dev/null
