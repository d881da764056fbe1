#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` once per machine from the llama.cpp tree vendored in the
# llama-cpp-python source package that MTP Studio pins, so the remote-backend tests and the
# side-by-side benchmarks talk to the same llama.cpp the app runs in-process. The binary is
# cached; later calls print its path at once.
#
#   bash packaging/build_llama_server.sh              # prints the path of the cached llama-server
#   bash packaging/build_llama_server.sh --portable   # the portable build, whatever this CPU runs
#   bash packaging/build_llama_server.sh --print-build-flags   # each build's flags and folder
#
# Target llama-server only. As set-up does for llama-cpp-python (install_llama_cpp.sh), a new
# build is proven by a 4-token run on the demo model (packaging/smoke_llama.py --server): the
# native build (-march=native, one static binary; about 5 minutes on 2 cores) first, and when it
# dies by a signal the portable one (shared libraries and one CPU module per micro-architecture
# beside the binary, where ggml looks; see docs/install.md for its build time), said in one line;
# a portable CPU variant that dies is removed and the next one down tried. Each build is cached
# under a key of its flags (and, for native code, of this CPU's instruction sets):
# ${MTP_STUDIO_LLAMA_SERVER_CACHE:-~/.cache/mtp-studio/llama-server}/<version>/<key>/bin/
# Environment: PYTHON (default .venv/bin/python, else python3), CMAKE_BUILD_PARALLEL_LEVEL.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=packaging/build_plan.sh
source packaging/build_plan.sh

NATIVE_FLAGS="-DBUILD_SHARED_LIBS=OFF"
# The portable modules need shared libraries; $ORIGIN lets the cached copy find them.
SERVER_PORTABLE_FLAGS="-DBUILD_SHARED_LIBS=ON -DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON -DCMAKE_INSTALL_RPATH=\$ORIGIN -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON"
LLAMA_VERSION=$(llama_version)
ROOT_CACHE=${MTP_STUDIO_LLAMA_SERVER_CACHE:-$HOME/.cache/mtp-studio/llama-server}/$LLAMA_VERSION
PYTHON=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
step() { echo "build_llama_server: $*" >&2; }

# A folder per build: bin/ (llama-server and, portable, its libraries), then PROVEN when its
# smoke run passed or DIED (the signal) when it died, so later calls decide at once.
folder_of() { printf '%s/%s\n' "$ROOT_CACHE" "$(build_key "$1")"; }

case "${1:-}" in
    --portable) CHOICES=("$SERVER_PORTABLE_FLAGS") ;;
    "") CHOICES=("$NATIVE_FLAGS" "$SERVER_PORTABLE_FLAGS") ;;
    --print-build-flags)
        echo "native: $NATIVE_FLAGS (this CPU: $(cpu_features)) in $(folder_of "$NATIVE_FLAGS")"
        echo "portable: $SERVER_PORTABLE_FLAGS in $(folder_of "$SERVER_PORTABLE_FLAGS")"
        exit 0
        ;;
    *)
        echo "build_llama_server: unknown option $1; use no option, --portable or --print-build-flags" >&2
        exit 2
        ;;
esac

build() {
    local flags=$1 folder=$2 work source_dir
    if ! command -v cmake >/dev/null 2>&1 || ! command -v ninja >/dev/null 2>&1; then
        # The build tools from PyPI (the same ones llama-cpp-python's wheel build uses).
        "$PYTHON" -m pip install --quiet cmake ninja >&2
        PATH="$(dirname "$PYTHON"):$PATH"
    fi
    work=$(mktemp -d)
    step "building llama-server from llama-cpp-python $LLAMA_VERSION's vendored llama.cpp with $flags (once)"
    "$PYTHON" -m pip download --quiet --no-deps --no-binary :all: --dest "$work" \
        "llama-cpp-python==$LLAMA_VERSION" >&2
    tar -xzf "$work"/llama_cpp_python-"$LLAMA_VERSION".tar.gz -C "$work"
    source_dir=$work/llama_cpp_python-$LLAMA_VERSION/vendor/llama.cpp
    # shellcheck disable=SC2086  # flags are words
    cmake -S "$source_dir" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release $flags \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF >&2
    cmake --build "$work/build" --target llama-server \
        --parallel "${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}" >&2
    # Copied under a temporary name, then renamed: a half-copied build is never cached.
    mkdir -p "$ROOT_CACHE"
    rm -rf "$folder.partial"
    mkdir -p "$folder.partial/bin"
    cp "$work/build/bin/llama-server" "$folder.partial/bin/"
    for library in "$work"/build/bin/*.so*; do # a portable build's libraries and CPU modules
        [ ! -e "$library" ] || cp -P "$library" "$folder.partial/bin/"
    done
    rm -rf "$folder" "$work"
    mv "$folder.partial" "$folder"
}

# smoke FOLDER: sets SMOKE_STATUS (128 + N: died by signal N).
smoke() {
    SMOKE_STATUS=0
    (ulimit -c 0 && "$PYTHON" packaging/smoke_llama.py --server "$1/bin/llama-server" >&2) \
        || SMOKE_STATUS=$?
}

# The portable build's best variant died: remove it and the next ones down until one runs.
walk_down() {
    local folder=$1 died=$2 variant
    local variants=() removed=()
    while IFS= read -r variant; do variants+=("$variant"); done \
        < <("$PYTHON" packaging/smoke_llama.py --list-variants "$folder/bin")
    for variant in "${variants[@]}"; do
        rm -f "$folder/bin/libggml-cpu-$variant.so"
        removed+=("$variant")
        smoke "$folder"
        if [ "$SMOKE_STATUS" -eq 0 ]; then
            step "llama-server's ${removed[*]} CPU variant(s) died by $died here although this CPU claims their instruction sets (as AMX in some VMs); removed them from $folder"
            return 0
        fi
        [ "$SMOKE_STATUS" -gt 128 ] || return 1
    done
    return 1
}

for flags in "${CHOICES[@]}"; do
    folder=$(folder_of "$flags")
    if [ -f "$folder/PROVEN" ]; then
        echo "$folder/bin/llama-server"
        exit 0
    fi
    if [ -f "$folder/DIED" ]; then
        continue
    fi
    [ -x "$folder/bin/llama-server" ] || build "$flags" "$folder"
    smoke "$folder"
    if [ "$SMOKE_STATUS" -gt 128 ] && [ "$flags" = "$SERVER_PORTABLE_FLAGS" ]; then
        walk_down "$folder" "SIG$(kill -l $((SMOKE_STATUS - 128)))" || true
    fi
    if [ "$SMOKE_STATUS" -eq 0 ]; then
        touch "$folder/PROVEN"
        echo "$folder/bin/llama-server"
        exit 0
    fi
    if [ "$SMOKE_STATUS" -le 128 ]; then
        step "the llama-server build in $folder fails its 4-token test (exit status $SMOKE_STATUS, see above)"
        exit 1
    fi
    signal=SIG$(kill -l $((SMOKE_STATUS - 128)))
    echo "$signal" >"$folder/DIED"
    step "the llama-server built with $flags died by $signal in a 4-token test: it holds an instruction this CPU does not run; trying the portable build"
done
step "no llama-server build runs on this CPU: each died by a signal in a 4-token test"
exit 1
