#!/usr/bin/env bash
# Exercises llama.cpp's Vulkan path on a machine without a GPU, through Mesa's lavapipe (a
# software Vulkan device), so the Vulkan build is known to work before an AMD user tries it.
# Not in CI: the Vulkan build compiles hundreds of shaders (about an hour on 2 cores).
#
#   bash bench/vulkan_lavapipe.sh [REPORT]   # default report: vulkan-lavapipe-report.txt
#
# 1. installs Debian's lavapipe and the Vulkan build tools (mesa-vulkan-drivers, vulkan-tools,
#    glslc, libvulkan-dev, spirv-headers)
#    with apt-get when missing (root only);
# 2. builds the Vulkan llama-cpp-python wheel once, cached in its own folder (the one
#    packaging/setup.sh uses for -DGGML_VULKAN=on), and unpacks it into a folder beside the
#    wheel: the virtualenv's own (CPU) llama-cpp-python is never replaced;
# 3. runs the greedy-exactness tests and `bench decode` on the demo model with that build,
#    and writes the report: devices, build info, exactness, acceptance by depth, speed.
# Environment: PYTHON (default .venv/bin/python, else python3), MTP_STUDIO_WHEEL_CACHE,
# VULKAN_INCLUDE_DIR (Vulkan-Headers 1.3.272+; default /usr/include, else Debian 13's, see below).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=packaging/build_plan.sh
source packaging/build_plan.sh

REPORT=${1:-vulkan-lavapipe-report.txt}
if [ -z "${PYTHON:-}" ]; then
    if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
FLAGS="-DGGML_VULKAN=on"
LLAMA_VERSION=$(sed -n 's/.*"llama-cpp-python==\([^"]*\)".*/\1/p' pyproject.toml)
WHEELS=$(wheel_cache_dir "$FLAGS")
SITE=$WHEELS/site-$LLAMA_VERSION
step() { echo "vulkan-lavapipe: $*" >&2; }

missing=()
for pair in vulkaninfo:vulkan-tools glslc:glslc; do
    _has "${pair%%:*}" || missing+=("${pair#*:}")
done
[ -e /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] || [ -e /usr/share/vulkan/icd.d/lvp_icd.aarch64.json ] \
    || missing+=(mesa-vulkan-drivers)
[ -e /usr/include/vulkan/vulkan.h ] || missing+=(libvulkan-dev)
[ -e /usr/share/cmake/SPIRV-Headers/SPIRV-HeadersConfig.cmake ] || missing+=(spirv-headers)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "vulkan-lavapipe: missing ${missing[*]}; run: sudo apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
    step "installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null
fi

# llama.cpp's Vulkan backend needs Vulkan-Headers 1.3.272 or newer (VK_EXT_layer_settings);
# Debian 12 ships 1.3.239. Then the headers of Debian 13's libvulkan-dev are unpacked into the
# cache (apt-get download with a private source list and lists folder: the system's apt sources
# and installed packages are not touched) and the build is pointed at them.
header_version() { sed -n 's/^#define VK_HEADER_VERSION \([0-9]*\).*/\1/p' "$1/vulkan/vulkan_core.h"; }
VULKAN_INCLUDE_DIR=${VULKAN_INCLUDE_DIR:-/usr/include}
if [ "$(header_version "$VULKAN_INCLUDE_DIR")" -lt 272 ]; then
    headers=${MTP_STUDIO_WHEEL_CACHE:-$HOME/.cache/mtp-studio/wheels}/vulkan-headers-trixie
    if [ ! -f "$headers/usr/include/vulkan/vulkan_core.h" ]; then
        step "Vulkan-Headers $(header_version "$VULKAN_INCLUDE_DIR") are too old for llama.cpp (needs 1.3.272+): unpacking Debian 13's libvulkan-dev into $headers"
        apt_dir=$(mktemp -d)
        mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$headers"
        echo "deb http://deb.debian.org/debian trixie main" >"$apt_dir/sources.list"
        apt_private=(-o "Dir::Etc::sourcelist=$apt_dir/sources.list" -o "Dir::Etc::sourceparts=-"
            -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache")
        apt-get "${apt_private[@]}" update >/dev/null
        (cd "$apt_dir" && apt-get "${apt_private[@]}" download libvulkan-dev >/dev/null 2>&1)
        dpkg-deb -x "$apt_dir"/libvulkan-dev_*.deb "$headers"
        rm -rf "$apt_dir"
    fi
    VULKAN_INCLUDE_DIR=$headers/usr/include
    FLAGS="$FLAGS -DVulkan_INCLUDE_DIR=$VULKAN_INCLUDE_DIR"
    WHEELS=$(wheel_cache_dir "$FLAGS")
    SITE=$WHEELS/site-$LLAMA_VERSION
fi

mkdir -p "$WHEELS"
if ! ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
    step "building llama-cpp-python $LLAMA_VERSION with $FLAGS into $WHEELS (long: Vulkan shaders)"
    CMAKE_ARGS="$FLAGS" CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} \
        "$PYTHON" -m pip wheel --no-deps --no-cache-dir --wheel-dir "$WHEELS" "llama-cpp-python==$LLAMA_VERSION"
fi
if [ ! -d "$SITE/llama_cpp" ]; then
    step "unpacking the wheel into $SITE"
    "$PYTHON" -m pip install --quiet --no-deps --target "$SITE" "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl
fi

# lavapipe is a CPU-type device, which llama.cpp skips unless it is named explicitly.
export GGML_VK_VISIBLE_DEVICES=${GGML_VK_VISIBLE_DEVICES:-0}
export PYTHONPATH="$SITE:$PWD" QT_QPA_PLATFORM=offscreen
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

step "checking that the build offloads to the Vulkan device"
"$PYTHON" - >"$work/build.txt" <<'PY'
import llama_cpp

print("llama_cpp from", llama_cpp.__file__)
print("GPU offload:", bool(llama_cpp.llama_supports_gpu_offload()))
print("system info:", llama_cpp.llama_print_system_info().decode().strip())
PY
grep -q "GPU offload: True" "$work/build.txt" || {
    cat "$work/build.txt" >&2
    echo "vulkan-lavapipe: the wheel in $WHEELS does not offload to a GPU; delete it and rerun" >&2
    exit 1
}

step "greedy exactness (tests/runtime/test_exactness.py) on Vulkan"
set +e
"$PYTHON" -m pytest -q -p no:cacheprovider tests/runtime/test_exactness.py >"$work/exactness.txt" 2>&1
exactness_rc=$?
step "bench decode on the demo model on Vulkan"
"$PYTHON" -m app bench decode --repeats 1 --max-tokens 64 --json >"$work/decode.json" 2>"$work/decode.err"
decode_rc=$?
set -e

{
    echo "# llama.cpp Vulkan on Mesa lavapipe — $(date -u +%Y-%m-%dT%H:%MZ)"
    echo
    echo "## Vulkan devices"
    vulkaninfo --summary 2>/dev/null | grep -E 'deviceName|deviceType|driverInfo' || true
    echo
    echo "## Build ($FLAGS, llama-cpp-python $LLAMA_VERSION)"
    cat "$work/build.txt"
    echo
    echo "## Greedy exactness: MTP output identical to plain decoding (exit $exactness_rc)"
    tail -n 5 "$work/exactness.txt"
    echo
    echo "## bench decode, demo model (exit $decode_rc)"
    if [ "$decode_rc" = 0 ]; then
        "$PYTHON" bench/decode_summary.py "$work/decode.json"
    else
        tail -n 20 "$work/decode.err"
    fi
} | tee "$REPORT"
step "report written to $REPORT"
[ "$exactness_rc" = 0 ] && [ "$decode_rc" = 0 ]
