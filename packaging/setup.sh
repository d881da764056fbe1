#!/usr/bin/env bash
# Sets up MTP Studio in ./.venv on a fresh machine: Python packages, plus llama-cpp-python built
# once from source (PyPI ships no wheel) and cached as a wheel so later set-ups take seconds.
#
#   bash packaging/setup.sh            # the app and its test tools (llama-server is built by the
#                                      # tests that need it, once per machine, and cached)
#   CMAKE_ARGS="-DGGML_CUDA=on" bash packaging/setup.sh   # llama.cpp with CUDA
#   (on macOS, Metal is on by default)
#
# Environment: MTP_STUDIO_WHEEL_CACHE (default ~/.cache/mtp-studio/wheels), PYTHON (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
LLAMA_VERSION=$(sed -n 's/.*"llama-cpp-python==\([^"]*\)".*/\1/p' pyproject.toml)
# The wheel cache is keyed by the build flags, so a CPU wheel is never reused for a CUDA build.
flags_key=$(printf '%s' "${CMAKE_ARGS:-cpu}" | sha256sum | cut -c1-12)
WHEELS=${MTP_STUDIO_WHEEL_CACHE:-$HOME/.cache/mtp-studio/wheels}/$flags_key
mkdir -p "$WHEELS"

if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip

if ! ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
    echo "setup: building llama-cpp-python $LLAMA_VERSION from source (once; about 5 minutes on 2 cores)"
    CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)} \
        .venv/bin/python -m pip wheel --no-deps --wheel-dir "$WHEELS" "llama-cpp-python==$LLAMA_VERSION"
fi

.venv/bin/python -m pip install --quiet --find-links "$WHEELS" -e ".[dev,bundle]"
echo "setup: done — run .venv/bin/mtp-studio"
