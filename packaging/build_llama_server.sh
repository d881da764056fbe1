#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` once per machine from the llama.cpp tree vendored in the
# llama-cpp-python source package that MTP Studio pins, so the remote-backend tests talk to the
# same llama.cpp the app runs in-process. The binary is cached; later calls print its path at once.
#
#   bash packaging/build_llama_server.sh        # prints the path of the cached llama-server
#
# CPU build, target llama-server only (about 5 minutes on 2 cores, once). The cache is keyed by the
# llama-cpp-python version: ${MTP_STUDIO_LLAMA_SERVER_CACHE:-~/.cache/mtp-studio/llama-server}/<version>/
# Environment: PYTHON (default .venv/bin/python, else python3), CMAKE_BUILD_PARALLEL_LEVEL.
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_VERSION=$(sed -n 's/.*"llama-cpp-python==\([^"]*\)".*/\1/p' pyproject.toml)
CACHE=${MTP_STUDIO_LLAMA_SERVER_CACHE:-$HOME/.cache/mtp-studio/llama-server}/$LLAMA_VERSION
BINARY=$CACHE/bin/llama-server
if [ -x "$BINARY" ]; then
    echo "$BINARY"
    exit 0
fi
PYTHON=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
if ! command -v cmake >/dev/null 2>&1 || ! command -v ninja >/dev/null 2>&1; then
    # The build tools from PyPI (the same ones llama-cpp-python's wheel build uses).
    "$PYTHON" -m pip install --quiet cmake ninja >&2
    PATH="$(dirname "$PYTHON"):$PATH"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "build_llama_server: building llama-server from llama-cpp-python $LLAMA_VERSION's vendored llama.cpp (once)" >&2
"$PYTHON" -m pip download --quiet --no-deps --no-binary :all: --dest "$work" \
    "llama-cpp-python==$LLAMA_VERSION" >&2
tar -xzf "$work"/llama_cpp_python-"$LLAMA_VERSION".tar.gz -C "$work"
source_dir=$work/llama_cpp_python-$LLAMA_VERSION/vendor/llama.cpp
# Static libraries: the binary runs from the cache without the build tree's shared objects.
cmake -S "$source_dir" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF >&2
cmake --build "$work/build" --target llama-server \
    --parallel "${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}" >&2

# Install under a temporary name, then rename, so a half-copied binary is never cached.
mkdir -p "$CACHE/bin"
cp "$work/build/bin/llama-server" "$CACHE/bin/.llama-server.partial"
mv "$CACHE/bin/.llama-server.partial" "$BINARY"
echo "$BINARY"
