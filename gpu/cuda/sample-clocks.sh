#!/usr/bin/env bash
# sample-clocks.sh CSV CMD...: runs CMD while nvidia-smi samples GPU $T2_CLOCKS_GPU (default 0)
# every 50 ms — SM clock, power draw, power limit, temperature and the driver's clock-event
# reasons — into CSV, and exits with CMD's status. It only reads: the clocks and power limit stay
# as the machine has them.
#
# Why: the 1.7B training step holds H100s and H200s at their 700 W limit, with the SM clock
# ~20% below its maximum (docs/PERFORMANCE.md), so a benchmark's number means little without the
# clock it ran at. device-check.sh summarizes the CSV in Python (the GPU machines have no Go);
# `make gpu-bench` with gpu/cuda/powertrace (go run ./gpu/cuda/powertrace/powerplot).
set -uo pipefail
if (($# < 2)); then
  echo "usage: sample-clocks.sh CSV CMD [ARG...]" >&2
  exit 2
fi
csv=$1
shift
gpu=${T2_CLOCKS_GPU:-0}
q=timestamp,clocks.sm,power.draw,power.limit,temperature.gpu,clocks_event_reasons.active
# drivers before 535 call the reasons clocks_throttle_reasons
nvidia-smi --query-gpu=$q --format=csv,noheader,nounits -i "$gpu" >/dev/null 2>&1 || q=${q/clocks_event/clocks_throttle}
nvidia-smi --query-gpu=$q --format=csv,noheader,nounits -i "$gpu" -lms 50 >"$csv" 2>/dev/null &
pid=$!
"$@"
rc=$?
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
exit $rc
