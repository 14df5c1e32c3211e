#!/usr/bin/env bash
# Builds tau2rl's binaries with progress, for `make build` (and so `make run`):
#
#   deploy/scripts/build.sh BIN_DIR BINARY...      e.g. build.sh bin tau2-producer tau2-trainer
#
# A first build compiles some 500 packages (the standard library's included, DuckDB's cgo
# wrapper for tau2-query) and takes minutes on two cores; later builds reuse Go's cache and take
# seconds. So it says first how many packages the binaries need, then prints a line every few
# seconds with the packages compiled so far and the elapsed time (from `go build -v`, which names
# each package it compiles), and a line per binary as it is linked. Compiler errors pass through
# unchanged. $GO picks the go command (default go); $BUILD_PROGRESS_EVERY the seconds between
# progress lines (default 5).
set -euo pipefail
bin=${1:?usage: build.sh BIN_DIR BINARY...}
shift
go=${GO:-go}
every=${BUILD_PROGRESS_EVERY:-5}
pkgs=()
for b in "$@"; do
  [[ -d cmd/$b ]] && pkgs+=("./cmd/$b")
done
((${#pkgs[@]})) || { echo "build: no binaries to build" >&2; exit 2; }
mkdir -p "$bin"
total=$("$go" list -deps "${pkgs[@]}" | wc -l)
echo "build: ${#pkgs[@]} binaries into $bin/ ($total packages; a first build compiles them all and takes minutes, later ones seconds)"
start=$SECONDS
n=0
last=$SECONDS
# go build -v names each package as it compiles it (nothing for a cached one); a line with a space
# or a colon, or starting with '#', is an error message.
set +e
"$go" build -v -o "$bin/" "${pkgs[@]}" 2>&1 | while IFS= read -r line; do
  if [[ $line =~ ^[A-Za-z0-9_./~+-]+$ ]]; then
    n=$((n + 1))
    if [[ $line == */cmd/tau2-* ]]; then
      printf 'build: [%4d/%d] %5ds  linked %s\n' "$n" "$total" $((SECONDS - start)) "${line##*/}"
    elif ((SECONDS - last >= every)); then
      printf 'build: [%4d/%d] %5ds  %s\n' "$n" "$total" $((SECONDS - start)) "$line"
      last=$SECONDS
    fi
  else
    printf '%s\n' "$line" >&2
  fi
done
status=${PIPESTATUS[0]}
set -e
if ((status != 0)); then
  echo "build: failed after $((SECONDS - start))s" >&2
  exit "$status"
fi
echo "build: done in $((SECONDS - start))s"
