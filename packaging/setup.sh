#!/usr/bin/env bash
# Sets up MTP Studio in ./.venv on a fresh machine: Python packages, plus llama-cpp-python built
# once from source (PyPI ships no wheel), cached as a wheel so later set-ups take seconds, and
# proven by a 4-token generation before set-up ends (packaging/install_llama_cpp.sh: a build that
# dies on this CPU is replaced by the portable one).
#
#   bash packaging/setup.sh                      # builds for the GPU it finds (Metal, CUDA,
#                                                # ROCm, Vulkan) or the CPU, with CPU code
#                                                # native to this CPU; see build_plan.sh
#   bash packaging/setup.sh --portable           # CPU code for any CPU, its variant picked at
#                                                # load: for a VM, an image or a home folder
#                                                # that moves between machines
#   bash packaging/setup.sh --print-build-flags  # prints that choice and why; changes nothing
#   CMAKE_ARGS="-DGGML_CUDA=on" bash packaging/setup.sh   # your own flags win
#
# llama-server is built by the tests that need it, once per machine, and cached.
# Environment: MTP_STUDIO_WHEEL_CACHE (default ~/.cache/mtp-studio/wheels), PYTHON (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=packaging/build_plan.sh
source packaging/build_plan.sh

PYTHON=${PYTHON:-python3}
PRINT=""
CPU_CODE=""
for option in "$@"; do
    case "$option" in
        --print-build-flags) PRINT=yes ;;
        --portable) CPU_CODE=portable ;;
        *)
            echo "setup: unknown option ${option}; use no option, --portable or --print-build-flags" >&2
            exit 2
            ;;
    esac
done

if [ -n "$PRINT" ]; then
    plan_build $CPU_CODE
    printf '%s' "$PLAN_HINTS"
    echo "build: $PLAN_BUILD"
    echo "why: $PLAN_REASON"
    case "$PLAN_CPU" in
        native) echo "CPU code: native, for this CPU's instruction sets ($(cpu_features)); a 4-token test after install switches to the portable build if it dies" ;;
        portable) echo "CPU code: portable, one module per CPU micro-architecture, the best one this CPU runs picked at load" ;;
        *) echo "CPU code: the instruction sets CMAKE_ARGS name (GGML_NATIVE=OFF)" ;;
    esac
    echo "CMAKE_ARGS: ${PLAN_FLAGS:-(none, the CPU defaults of llama.cpp)}"
    [ -z "$PLAN_ENV" ] || echo "environment: $PLAN_ENV"
    echo "wheel: llama-cpp-python $(llama_version), cached in $(wheel_cache_dir "$PLAN_FLAGS")"
    exit 0
fi

if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# First llama-cpp-python, so that the app's requirement on it is already met by this build.
bash packaging/install_llama_cpp.sh .venv/bin/python ${CPU_CODE:+--portable}
.venv/bin/python -m pip install --quiet -e ".[dev,bundle]"
echo "setup: done — run .venv/bin/mtp-studio"
