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
# No CUDA is needed here: the cuda-tagged binaries link libt2cuda.so dynamically, and at link time a
# stand-in library generated from csrc/t2cuda.h (every t2_* function returning an error) satisfies
# the linker; empty cuBLAS/cudart/NCCL stand-ins satisfy the -l flags (--as-needed drops them, since
# only the kernels use them). On the GPU machine, deploy/scripts/learn-prebuilt.sh builds the real
# libt2cuda.so and libt2nccl.so with nvcc from the same sources and puts them on LD_LIBRARY_PATH,
# so the binaries run the real kernels. A machine with Go and nvcc needs none of this: `make gpu-trainer gpu-sampler`.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
grep -qx '/.devbin/' .git/info/exclude 2>/dev/null || echo '/.devbin/' >> .git/info/exclude
stub=$root/.devbin/pgb-stub
out=$root/.devbin/bin
rm -rf "$out" && mkdir -p "$stub" "$out"

# Stand-ins generated from the C ABI headers: every function a header declares gets a body — a
# status-returning one returns its status type's error, a void one does nothing, any other (a size
# query) returns 0. A declaration the pattern misses fails the link below with its name, not at
# run time.
cat > "$stub/stubgen.py" <<'EOF'
import re, sys
header, st = sys.argv[1], sys.argv[2]
body = re.sub(r'/\*.*?\*/', '', open(header).read(), flags=re.S)
body = re.sub(r'//[^\n]*', '', body)
body = re.sub(r'^\s*#[^\n]*', '', body, flags=re.M)
print('#include "%s"' % header)
for ret, decl in re.findall(r'^\s*((?:const\s+)?\w+(?:\s*\*)*)\s*(\**\s*t2\w*\s*\([^;{]*\))\s*;', body, flags=re.M):
    ret = ret.strip()
    if ret == st:
        print(ret + ' ' + decl + ' { ' + st + ' stub_status_ = {0}; stub_status_.code = -1; '
              'stub_status_.msg = "the stand-in library is loaded: put the real one on LD_LIBRARY_PATH"; return stub_status_; }')
    elif ret == 'void':
        print(ret + ' ' + decl + ' {}')
    else:
        print(ret + ' ' + decl + ' { return 0; }')
EOF
python3 "$stub/stubgen.py" "$root/gpu/cuda/csrc/t2cuda.h" t2_status > "$stub/t2cuda.c"
python3 "$stub/stubgen.py" "$root/gpu/collective/nccl/csrc/t2nccl.h" t2n_status > "$stub/t2nccl.c"
for l in t2cuda t2nccl; do gcc -shared -fPIC -o "$stub/lib$l.so" "$stub/$l.c"; done
for l in cublas cublasLt cudart nccl; do echo "" | gcc -shared -fPIC -x c -o "$stub/lib$l.so" -; done

ldflags='-s -w'
want=" $* "
for d in cmd/*/; do
  b=$(basename "$d")
  [[ $b == internal ]] && continue
  [[ $# -gt 0 && $want != *" $b "* ]] && continue
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
