#!/usr/bin/env bash
# Sets up MTP Studio in ./.venv on a fresh machine: Python packages, plus llama-cpp-python built
# once from source (PyPI ships no wheel) and cached as a wheel so later set-ups take seconds.
#
#   bash packaging/setup.sh                      # builds for the GPU it finds (Metal, CUDA,
#                                                # ROCm, Vulkan) or the CPU; see build_plan.sh
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
LLAMA_VERSION=$(sed -n 's/.*"llama-cpp-python==\([^"]*\)".*/\1/p' pyproject.toml)
plan_build
WHEELS=$(wheel_cache_dir "$PLAN_FLAGS")

case "${1:-}" in
    --print-build-flags)
        printf '%s' "$PLAN_HINTS"
        echo "build: $PLAN_BUILD"
        echo "why: $PLAN_REASON"
        echo "CMAKE_ARGS: ${PLAN_FLAGS:-(none, the CPU defaults of llama.cpp)}"
        [ -z "$PLAN_ENV" ] || echo "environment: $PLAN_ENV"
        echo "wheel: llama-cpp-python $LLAMA_VERSION, cached in $WHEELS"
        exit 0
        ;;
    "") ;;
    *)
        echo "setup: unknown option ${1}; use no option or --print-build-flags" >&2
        exit 2
        ;;
esac

printf '%s' "$PLAN_HINTS"
echo "setup: llama.cpp build $PLAN_BUILD — $PLAN_REASON"
mkdir -p "$WHEELS"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip

if ! ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
    echo "setup: building llama-cpp-python $LLAMA_VERSION from source (once; about 5 minutes on 2 cores for the CPU, longer for a GPU)"
    # shellcheck disable=SC2086  # PLAN_ENV is NAME=value words
    env $PLAN_ENV CMAKE_ARGS="$PLAN_FLAGS" \
        CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)} \
        .venv/bin/python -m pip wheel --no-deps --wheel-dir "$WHEELS" "llama-cpp-python==$LLAMA_VERSION"
fi
.venv/bin/python -m pip install --quiet --find-links "$WHEELS" -e ".[dev,bundle]"
# This build's wheel replaces whichever build was installed (same version, other flags).
.venv/bin/python -m pip install --quiet --no-deps --force-reinstall "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl
echo "setup: done — run .venv/bin/mtp-studio"
