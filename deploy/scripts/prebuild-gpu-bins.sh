#!/usr/bin/env bash
# prebuild-gpu-bins.sh: build every tau2rl binary HERE, the CUDA ones (tau2-trainer, tau2-sampler)
# with -tags cuda, for a GPU machine that has nvcc and the CUDA libraries but no Go toolchain.
#
#   bash deploy/scripts/prebuild-gpu-bins.sh         # from the project root; writes .devbin/bins.tar.xz
#                                                    # and .devbin/assets.tar.xz (the τ² data, the tokenizer)
#   bash deploy/scripts/prebuild-gpu-bins.sh tau2-run tau2-sampler …   # only these binaries
#
# What `tau2-run experiment` needs (the smallest archive, about 22 MB, for a 64 MiB transfer
# limit): tau2-run tau2-broker tau2-scripted-llm tau2-archiver tau2-trainer tau2-producer
# tau2-eval tau2-sampler.
#
# No CUDA is needed here: the cuda-tagged binaries link libt2cuda.so dynamically, and at link time
# gpu/stub-libs.sh's stand-ins satisfy the linker (the kernels' library generated from
# csrc/t2cuda.h, empty cuBLAS/cudart/NCCL ones that --as-needed drops). On the GPU machine,
# deploy/scripts/learn-prebuilt.sh builds the real libt2cuda.so and libt2nccl.so with nvcc from the
# same sources and puts them on LD_LIBRARY_PATH, so the binaries run the real kernels. A machine
# with Go and nvcc needs none of this: `make gpu-trainer gpu-sampler`.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
excl=$(git rev-parse --git-path info/exclude) # a worktree's .git is a file
grep -qx '/.devbin/' "$excl" 2>/dev/null || echo '/.devbin/' >> "$excl"
stub=$root/.devbin/pgb-stub
out=$root/.devbin/bin
rm -rf "$out" && mkdir -p "$stub" "$out"

bash gpu/stub-libs.sh "$stub" # link-time stand-ins for the kernels, CUDA and NCCL

ldflags='-s -w'
want=" $* "
for d in cmd/*/; do
  b=$(basename "$d")
  [[ $b == internal ]] && continue
  [[ $# -gt 0 && $want != *" $b "* ]] && continue
  # tau2-query links DuckDB (~70 MB) and no GPU workflow runs it: only when named.
  [[ $# -eq 0 && $b == tau2-query ]] && continue
  tags=""
  [[ $b == tau2-trainer || $b == tau2-sampler ]] && tags="-tags cuda"
  echo "prebuild-gpu-bins: $b ${tags}" >&2
  CGO_ENABLED=1 CGO_LDFLAGS="-Wl,--as-needed -L$stub" \
    go build -trimpath $tags -ldflags="$ldflags" -o "$out/$b" "./$d"
done
tar -C "$root/.devbin" -cf - bin | xz -T0 -9 > "$root/.devbin/bins.tar.xz"
rm -rf "$out"
echo "prebuild-gpu-bins: $(du -h "$root/.devbin/bins.tar.xz" | cut -f1) .devbin/bins.tar.xz" >&2

# The τ² data and the Qwen3 tokenizer for learn-prebuilt.sh, as tau2-assets resolves them here
# (docs/ASSETS.md: the environment, ../shared, the cache or the pinned download), under the names
# it unpacks them as (tau2-data/, qwen3-tokenizer/).
eval "$(go run ./cmd/tau2-assets)" || { echo "prebuild-gpu-bins: tau2-assets could not resolve the data" >&2; exit 1; }
staging=$root/.devbin/assets
rm -rf "$staging" && mkdir -p "$staging"
ln -s "$TAU2_DATA_DIR" "$staging/tau2-data"
ln -s "$QWEN3_TOKENIZER_DIR" "$staging/qwen3-tokenizer"
tar -C "$staging" -chf - tau2-data qwen3-tokenizer | xz -T0 -9 > "$root/.devbin/assets.tar.xz"
rm -rf "$staging"
echo "prebuild-gpu-bins: $(du -h "$root/.devbin/assets.tar.xz" | cut -f1) .devbin/assets.tar.xz" >&2
