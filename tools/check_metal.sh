#!/usr/bin/env bash
# Static check of the Metal dialect (docs/design.md section 5.3) without Apple's compiler.
#  1. clang-14 compiles every core/kernels header (after compat_metal.h) and every
#     metal/*.metal as C++ for OpenCL 2021 with the generic address space, pipes, device
#     enqueue and fp64 off, through the stub <metal_stdlib> in tools/metal_check/ (maps
#     device/threadgroup/thread/constant onto __global/__local/__private/__constant).
#     That rejects unqualified pointers to shared arrays, mixed address spaces, shared arrays
#     outside kernel scope, double, thread_local, exceptions, virtual functions.
#  2. A lint over the same sources (comments stripped) for what clang accepts but MSL does
#     not: lambdas, std::, new/delete, goto, try/catch, unqualified references, direct recursion.
# It cannot prove that `xcrun metal` accepts the files (see core/kernels/README.md).
# Usage: tools/check_metal.sh [clang] [--self-test]
#   --self-test: plants one violation at a time in a copy of the tree and requires the
#   check to fail on each (so the check itself is tested).
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
clang="clang-14"
self_test=0
for arg in "$@"; do
  case "$arg" in
    --self-test) self_test=1 ;;
    *) clang="$arg" ;;
  esac
done
command -v "$clang" >/dev/null 2>&1 || { echo "check_metal: $clang not found" >&2; exit 2; }

# check_tree ROOT: 0 when every file passes.
check_tree() {
  local tree="$1" fail=0 tmp
  tmp="$(mktemp -d)"
  local flags=(-x cl -cl-std=clc++2021
    -Xclang -cl-ext=-__opencl_c_generic_address_space,-__opencl_c_pipes,-__opencl_c_device_enqueue,-cl_khr_fp64,-__opencl_c_fp64
    -Xclang -finclude-default-header -fsyntax-only -Wno-unknown-attributes
    -I"$here/metal_check" -I"$tree/core/kernels")
  local h base
  for h in "$tree"/core/kernels/*.h; do
    base="$(basename "$h")"
    case "$base" in compat_cpu.h|compat_cuda.h) continue ;; esac
    printf '#include "compat_metal.h"\n#include "%s"\n' "$base" > "$tmp/$base.metal"
    if ! "$clang" "${flags[@]}" "$tmp/$base.metal" 2> "$tmp/err"; then
      echo "check_metal: FAIL core/kernels/$base"; cat "$tmp/err"; fail=1
    fi
  done
  local m
  for m in "$tree"/metal/*.metal; do
    [ -e "$m" ] || continue
    if ! "$clang" "${flags[@]}" "$m" 2> "$tmp/err"; then
      echo "check_metal: FAIL metal/$(basename "$m")"; cat "$tmp/err"; fail=1
    fi
  done
  rm -rf "$tmp"
  if ! python3 - "$tree" <<'PY'
import re, sys, pathlib
tree = pathlib.Path(sys.argv[1])
files = [f for f in sorted((tree / "core/kernels").glob("*.h"))
         if f.name not in ("compat_cpu.h", "compat_cuda.h")]
files += sorted((tree / "metal").glob("*.metal"))
banned = [
    (r"\bstd::", "C++ standard library"),
    (r"\bnew\b", "new"), (r"\bdelete\b", "delete"),
    (r"\bgoto\b", "goto"), (r"\btry\b", "try"), (r"\bcatch\b", "catch"), (r"\bthrow\b", "throw"),
    (r"\bthread_local\b", "thread_local"), (r"\bvirtual\b", "virtual"), (r"\bdouble\b", "double"),
    (r"\[[\w\s,&=*]*\]\s*(\([^()]*\))?\s*(mutable\s*)?(->\s*[\w:<>]+\s*)?\{", "lambda"),
    (r"[(,]\s*(const\s+)?(float|int|bool|unsigned|uint|ushort|short|char|long|ml_\w+)\s*&&?\s*\w+",
     "reference without an address space"),
    (r"#\s*include\s*<(?!metal_stdlib>|stdint\.h>)", "system header"),
]
def strip(src):
    src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
    src = re.sub(r"//[^\n]*", "", src)
    return re.sub(r'"(\\.|[^"\\])*"', '""', src)
bad = 0
for f in files:
    src = strip(f.read_text())
    for pat, what in banned:
        for mo in re.finditer(pat, src):
            line = src.count("\n", 0, mo.start()) + 1
            print(f"check_metal: FAIL {f.relative_to(tree)}:{line}: {what} not allowed in MSL kernels")
            bad = 1
    # Direct recursion: a function body that calls its own name.
    for mo in re.finditer(r"\bML_(?:HOST_)?FN\b[^;{()]*?\b(\w+)\s*\(", src):
        name, i = mo.group(1), src.find("{", mo.end())
        semi = src.find(";", mo.end())
        if i < 0 or (0 <= semi < i):
            continue
        depth, j = 0, i
        while j < len(src):
            depth += {"{": 1, "}": -1}.get(src[j], 0)
            if depth == 0:
                break
            j += 1
        if re.search(r"\b%s\s*\(" % re.escape(name), src[i:j]):
            line = src.count("\n", 0, mo.start()) + 1
            print(f"check_metal: FAIL {f.relative_to(tree)}:{line}: {name} calls itself (recursion)")
            bad = 1
sys.exit(bad)
PY
  then fail=1; fi
  return $fail
}

if [ "$self_test" = 1 ]; then
  status=0
  plant() {  # plant NAME CODE: appended to a copy of a kernel header; the check must fail
    local name="$1" code="$2" tree
    tree="$(mktemp -d)"
    mkdir -p "$tree/core" "$tree/metal"
    cp -r "$root/core/kernels" "$tree/core/"
    cp "$root"/metal/*.metal "$tree/metal/" 2>/dev/null
    printf '%s\n' "$code" > "$tree/core/kernels/zz_plant.h"
    # Caught means: the check fails and blames the planted file (not some other file).
    if ! check_tree "$tree" > "$tree/log" 2>&1 && grep -q "FAIL core/kernels/zz_plant.h" "$tree/log"; then
      echo "check_metal self-test: planted '$name' caught"
    else
      echo "check_metal self-test: planted '$name' was NOT caught"; cat "$tree/log"; status=1
    fi
    rm -rf "$tree"
  }
  plant "unqualified pointer to shared" 'ML_FN void zz(ML_CTX ctx) { float *p = ctx.scratch; p[0] = 1.0f; }'
  plant "shared pointer from device" 'ML_FN void zz(ML_DEVICE float *a) { ML_SHARED float *p = a; p[0] = 1.0f; }'
  plant "shared array in a helper" 'ML_FN void zz(int i) { ML_SHARED float buf[8]; buf[i] = 1.0f; }'
  plant "double" 'ML_FN float zz(float x) { double y = x; return (float)y; }'
  plant "lambda" 'ML_FN float zz(float x) { auto f = [](float y) { return y; }; return f(x); }'
  plant "std library" 'ML_FN float zz(float x) { return std::sqrt(x); }'
  plant "recursion" 'ML_FN int zz(int x) { return x > 0 ? zz(x - 1) : 0; }'
  plant "unqualified reference" 'ML_FN void zz(float &x) { x = 1.0f; }'
  if check_tree "$root"; then echo "check_metal self-test: clean tree passes"; else
    echo "check_metal self-test: the clean tree fails"; status=1; fi
  exit $status
fi

if check_tree "$root"; then
  echo "check_metal: OK (C++ for OpenCL address-space check + MSL subset lint; not a Metal compile)"
  exit 0
fi
exit 1
