#!/usr/bin/env bash
# Installs the system tools tau2rl's tests and demo use, from Debian's packages:
#   kcat       an independent Kafka client (librdkafka), for interoperability tests
#   promtool   validates the Prometheus scrape config and alert rules (package prometheus)
#   systemd-analyze  verifies the systemd units (package systemd)
#   node/npm   run the Hugging Face tokenizer and chat-template oracles
# Idempotent: it installs only what is missing. Without root it prints what is
# missing and exits 0, and the tests that need a tool skip saying so.
set -euo pipefail
need=()
command -v kcat >/dev/null || need+=(kcat)
command -v promtool >/dev/null || need+=(prometheus)
command -v systemd-analyze >/dev/null || need+=(systemd)
command -v npm >/dev/null || need+=(npm)
((${#need[@]})) || exit 0
if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: missing ${need[*]} (run as root or: sudo apt-get install ${need[*]}); tests that need them will skip" >&2
  exit 0
fi
echo "install-deps: apt-get install ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=300 update -qq >/dev/null
apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${need[@]}" >/dev/null
