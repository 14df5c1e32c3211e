#!/usr/bin/env bash
# stub-libs.sh DIR: stand-in shared libraries for linking the cuda-tagged Go code on a machine
# without CUDA (or without the GPU's toolkit): libt2cuda.so and libt2nccl.so from the C ABI
# headers, and empty libcublas, libcublasLt, libcudart and libnccl (linked with -Wl,--as-needed
# they drop out: only the kernels call them). A binary linked against them runs on the GPU machine
# with the real libraries first on LD_LIBRARY_PATH. One copy for gpu/cuda/prebuild-test.sh,
# gpu/dp/device-test.sh prebuild and deploy/scripts/prebuild-gpu-bins.sh.
#
# Every function a header declares gets a body: a status-returning one returns its status type's
# error ("the stand-in library is loaded"), so a binary started against the stand-ins says so
# instead of crashing; a void one does nothing; any other (a size query) returns 0. A declaration
# the pattern misses fails the link with its name, not at run time.
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: $0 DIR" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$1
mkdir -p "$dir"
cat > "$dir/stubgen.py" <<'EOF'
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
python3 "$dir/stubgen.py" "$root/gpu/cuda/csrc/t2cuda.h" t2_status > "$dir/t2cuda.c"
python3 "$dir/stubgen.py" "$root/gpu/collective/nccl/csrc/t2nccl.h" t2n_status > "$dir/t2nccl.c"
for l in t2cuda t2nccl; do gcc -shared -fPIC -o "$dir/lib$l.so" "$dir/$l.c"; done
echo 'void t2_no_cuda_(void){}' > "$dir/empty.c"
for l in cublas cublasLt cudart nccl; do gcc -shared -fPIC -o "$dir/lib$l.so" "$dir/empty.c"; done
