#!/usr/bin/env bash
# Builds the C consumers against the installed epabi package (find_package(epabi CONFIG)) and runs both:
# minimal_host (the plugin ABI without ONNX Runtime), then ort_consumer (the plugin inside real ONNX Runtime).
#
#   examples/c/run.sh [--ort LIBONNXRUNTIME | --no-ort] [--model MODEL.onnx] [--build-dir DIR]
#                     [-- ORT_CONSUMER_OPTIONS...]
#
# PYTHON (default python3) is the interpreter with epabi installed (pip install .). ONNX Runtime's library is
# --ort, else the newest onnxruntime/capi/libonnxruntime.so.* of the test suite's cached venvs
# ($EPABI_VENV_DIR, default $EPABI_CACHE_DIR/venvs, default ~/.cache/epabi/venvs), else that of the onnxruntime
# PYTHON imports. The model is --model, else epabi's built-in MLP (2 layers, width 8, batch 2) saved into the build
# folder (default examples/c/build). --no-ort builds both and runs minimal_host only. Options after -- go to ort_consumer (--env KEY=VALUE, --option KEY=VALUE,
# --runs N, --log-level N). Sets EPABI_ALLOW_SOFTWARE_ADAPTER=1 unless it is set, so a machine without an NVIDIA
# GPU gets the plugin's CPU software adapter.
#
# Output: "== minimal_host" and "== ort_consumer", each followed by that program's output. Exit status: that of
# the first program that failed; 2 for a bad argument (an option without its value, an --ort or --model file that
# does not exist); 77 when a C compiler, CMake, epabi or an ONNX Runtime library is missing (the test suite then
# skips).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-python3}"
ort="" model="" build="$here/build" no_ort=0
usage() { echo "run.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --ort|--model|--build-dir) [ $# -ge 2 ] && [ -n "$2" ] || usage "$1 needs a value" ;;&
    --ort) ort="$2"; shift 2 ;;
    --no-ort) no_ort=1; shift ;;
    --model) model="$2"; shift 2 ;;
    --build-dir) build="$2"; shift 2 ;;
    --) shift; break ;;
    *) usage "unknown argument '$1'" ;;
  esac
done
# what was asked for by name must exist: a skip (77) is only for what the machine lacks
[ -z "$ort" ] || [ -f "$ort" ] || usage "--ort $ort: no such file"
[ -z "$model" ] || [ -f "$model" ] || usage "--model $model: no such file"

skip() { echo "run.sh: skipped: $*" >&2; exit 77; }
command -v cmake >/dev/null 2>&1 || skip "no cmake"
command -v "${CC:-cc}" >/dev/null 2>&1 || skip "no C compiler (${CC:-cc})"
cmake_dir="$("$python" -c 'import epabi; print(epabi.get_cmake_dir())' 2>/dev/null)" ||
  skip "$python cannot import epabi (pip install .)"
plugin="$("$python" -c 'import epabi; print(epabi.get_library_path())')"

mkdir -p "$build"
cmake -S "$here" -B "$build" -Depabi_DIR="$cmake_dir" >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log" >&2; exit 1; }
cmake --build "$build" >"$build/build.log" 2>&1 || { cat "$build/build.log" >&2; exit 1; }

export EPABI_ALLOW_SOFTWARE_ADAPTER="${EPABI_ALLOW_SOFTWARE_ADAPTER:-1}"
echo "== minimal_host"
"$build/minimal_host" "$plugin"
[ "$no_ort" -eq 0 ] || exit 0

if [ -z "$ort" ]; then
  venvs="${EPABI_VENV_DIR:-${EPABI_CACHE_DIR:-$HOME/.cache/epabi}/venvs}"
  ort="$(ls -d "$venvs"/ort-*/lib/python*/site-packages/onnxruntime/capi/libonnxruntime.so.* 2>/dev/null |
         sort -V | tail -n 1 || true)"
fi
if [ -z "$ort" ]; then
  ort="$("$python" -c 'import glob, os, onnxruntime
print(sorted(glob.glob(os.path.join(os.path.dirname(onnxruntime.__file__), "capi", "libonnxruntime.so.*")))[-1])' \
         2>/dev/null || true)"
fi
[ -n "$ort" ] && [ -f "$ort" ] || skip "no ONNX Runtime library (give --ort, or pip install onnxruntime)"
if [ -z "$model" ]; then
  model="$build/mlp.onnx"
  "$python" -c 'import sys, epabi, onnx; onnx.save(epabi.models.mlp(layers=2, width=8, batch=2), sys.argv[1])' "$model"
fi
echo "== ort_consumer"
"$build/ort_consumer" "$ort" "$plugin" "$model" "$@"
