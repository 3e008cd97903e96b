#!/usr/bin/env bash
# Type-check of the Metal host code on Linux, against Apple's own headers (docs/design.md 6):
# the metal-cpp headers and MLX's Metal backend headers of the pinned macOS wheel
# mlx-metal==0.32.4 (fetched with pip into the cache directory once), plus the stub Apple
# system headers of tools/metal_check/apple. clang++-14 -std=c++17 -fsyntax-only compiles
#   - every Metal host source metal/*.cpp, with -DML_WITH_METAL=1;
#   - every source of the MLX package that includes Metal.hpp (its Metal eval_gpu code);
#   - metal/kernels.metal as C++ for OpenCL through tools/metal_check/metal_stdlib (address
#     spaces of the generated entry points).
# A wrong method name, argument type or address space fails it; it is not a Metal build
# (nothing is linked or run) and cannot see Objective-C runtime behaviour.
# Usage: tools/check_metal_host.sh CLANGXX CACHE_DIR [--self-test]
#   --self-test: plants API misuse in copies of the sources (a misspelt method, a wrong
#   argument type, in metal/ and in the MLX package's Metal eval_gpu; a kernel pointer without
#   address space) and requires each to be rejected.
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
clangxx="${1:-clang++-14}"
cache="${2:-$root/build/metal-check}"
self_test=0
[ "${3:-}" = "--self-test" ] && self_test=1
command -v "$clangxx" >/dev/null 2>&1 || { echo "check_metal_host: $clangxx not found" >&2; exit 2; }
python="${PYTHON:-python3}"

wheel_version="0.32.4"
inc="$cache/mlx-metal-$wheel_version/mlx/include"
if [ ! -f "$inc/metal_cpp/Metal/Metal.hpp" ]; then
  mkdir -p "$cache"
  if ! "$python" -m pip download --no-deps --only-binary=:all: --platform macosx_14_0_arm64 \
      "mlx-metal==$wheel_version" -d "$cache" -q; then
    echo "check_metal_host: cannot fetch mlx-metal==$wheel_version from PyPI (pip download" \
         "--platform macosx_14_0_arm64); the Metal host type-check needs its headers" >&2
    exit 2
  fi
  whl="$(ls "$cache"/mlx_metal-"$wheel_version"-*.whl 2>/dev/null | head -1)"
  [ -n "$whl" ] || { echo "check_metal_host: the downloaded wheel is missing" >&2; exit 2; }
  "$python" - "$whl" "$cache/mlx-metal-$wheel_version" <<'PY' || exit 2
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("mlx/include/")])
PY
fi

flags=(-std=c++17 -fsyntax-only -fblocks -include math.h -Wno-deprecated-declarations
  -I"$here/metal_check/apple" -I"$inc/metal_cpp" -I"$inc")
# The MLX package's sources may include nanobind (and so Python.h): their include directories,
# when this Python has nanobind.
pyflags=()
if pyinc="$("$python" -c 'import sysconfig, nanobind; print(sysconfig.get_paths()["include"]);
print(nanobind.include_dir()); print(nanobind.include_dir() + "/../ext/robin_map/include")' 2>/dev/null)"; then
  while IFS= read -r d; do pyflags+=(-I"$d"); done <<< "$pyinc"
fi
kflags=(-x cl -cl-std=clc++2021
  -Xclang -cl-ext=-__opencl_c_generic_address_space,-__opencl_c_pipes,-__opencl_c_device_enqueue,-cl_khr_fp64,-__opencl_c_fp64
  -Xclang -finclude-default-header -fsyntax-only -Wno-unknown-attributes -I"$here/metal_check")

# check_tree TREE: 0 when every source type-checks.
check_tree() {
  local tree="$1" fail=0 f n=0 names=""
  for f in "$tree"/metal/*.cpp; do
    [ -e "$f" ] || continue
    n=$((n + 1)); names="$names ${f#"$tree"/}"
    if ! "$clangxx" "${flags[@]}" -DML_WITH_METAL=1 -I"$tree/core/include" -I"$tree/core/src" \
        -I"$tree/core/kernels" -I"$tree/metal" "$f" 2> "$cache/err.log"; then
      echo "check_metal_host: FAIL ${f#"$tree"/}"; grep -E "error" "$cache/err.log" | head -20; fail=1
    fi
  done
  for f in $(grep -l -E "#include <Metal/Metal.hpp>|mlx/backend/metal/" "$tree"/python-mlx/src/*.cpp 2>/dev/null); do
    n=$((n + 1)); names="$names ${f#"$tree"/}"
    if ! "$clangxx" "${flags[@]}" "${pyflags[@]}" -DML_WITH_METAL=1 -I"$tree/core/include" \
        -I"$tree/python-mlx/src" "$f" 2> "$cache/err.log"; then
      echo "check_metal_host: FAIL ${f#"$tree"/}"; grep -E "error" "$cache/err.log" | head -20; fail=1
    fi
  done
  n=$((n + 1)); names="$names metal/kernels.metal"
  if ! clang-14 "${kflags[@]}" -I"$tree/core/kernels" "$tree/metal/kernels.metal" 2> "$cache/err.log"; then
    echo "check_metal_host: FAIL metal/kernels.metal"; grep -E "error" "$cache/err.log" | head -20; fail=1
  fi
  [ "$fail" = 0 ] && echo "check_metal_host: $n sources type-check against metal-cpp / MLX" \
    "$wheel_version:$names"
  return $fail
}

if [ "$self_test" = 1 ]; then
  status=0
  # plant NAME FILE OLD NEW: replaces the first OLD by NEW in a copy; the check must fail on FILE.
  plant() {
    local name="$1" file="$2" old="$3" new="$4" tree
    tree="$(mktemp -d)"
    mkdir -p "$tree/core" "$tree/python-mlx"
    cp -r "$root/core/include" "$root/core/src" "$root/core/kernels" "$tree/core/"
    cp -r "$root/metal" "$tree/"
    cp -r "$root/python-mlx/src" "$tree/python-mlx/" 2>/dev/null
    if ! grep -qF -- "$old" "$tree/$file"; then
      echo "check_metal_host self-test: '$old' not found in $file"; status=1; rm -rf "$tree"; return
    fi
    OLD="$old" NEW="$new" "$python" - "$tree/$file" <<'PY'
import os, sys
p = sys.argv[1]
s = open(p).read()
open(p, "w").write(s.replace(os.environ["OLD"], os.environ["NEW"], 1))
PY
    if ! check_tree "$tree" > "$tree/log" 2>&1 && grep -q "FAIL $file" "$tree/log"; then
      echo "check_metal_host self-test: planted '$name' rejected"
    else
      echo "check_metal_host self-test: planted '$name' was NOT rejected"; cat "$tree/log"; status=1
    fi
    rm -rf "$tree"
  }
  plant "misspelt method" metal/metal_backend.cpp "enc->endEncoding();" "enc->endEncodng();"
  plant "wrong argument type" metal/metal_backend.cpp \
    "enc->setBytes(p, NS::UInteger(len), NS::UInteger(index));" \
    "enc->setBytes(p, NS::UInteger(len), this);"
  plant "misspelt MLX encoder method" python-mlx/src/gpu_eval_metal.cpp \
    "encoder_of(user).set_compute_pipeline_state(" "encoder_of(user).set_pipeline_state("
  plant "wrong MLX argument type" python-mlx/src/gpu_eval_metal.cpp \
    "enc.set_output_array(*o, k + 1);" "enc.set_output_array(o, k + 1);"
  plant "missing address space" metal/kernels.metal \
    "#define ML_METAL_OUT_ARGS_O0 device float *o0 [[buffer(1)]]," \
    "#define ML_METAL_OUT_ARGS_O0 float *o0 [[buffer(1)]],"
  if check_tree "$root"; then echo "check_metal_host self-test: clean tree passes"; else
    echo "check_metal_host self-test: the clean tree fails"; status=1; fi
  exit $status
fi

check_tree "$root"
