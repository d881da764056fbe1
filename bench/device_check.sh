#!/usr/bin/env bash
# Everything a run on an NVIDIA GPU should prove, in one go, written to one report file:
#   1. the CUDA llama-cpp-python wheel, built once (or reused from the wheel cache);
#   2. the tests whose llama.cpp work then runs on the GPU (exactness, sampled exactness, the
#      backend, draft health, several sequences in one context, the accelerator probe) and a
#      check that llama.cpp reports CUDA;
#   3. `bench decode` on the demo model and on the --wide stand-ins (memory-bound, GPU-sized);
#   4. TTFT per turn of a growing conversation (`mtp-studio bench chat`).
# Made for a machine with no network: the CUDA wheel is built from a folder prepared on a
# machine with one (--prepare DIR: the llama-cpp-python sdist and its build requirements), or
# reused from MTP_STUDIO_WHEEL_CACHE. The virtualenv's own llama-cpp-python is never replaced:
# the CUDA build is unpacked beside its wheel and put first on PYTHONPATH.
#
#   bash bench/device_check.sh [--report FILE] [--offline DIR]   # the GPU run
#   bash bench/device_check.sh --prepare DIR                     # with network: fill DIR
#   bash bench/device_check.sh --dry-run                         # print each step, run none
#   bash bench/device_check.sh --cpu                             # the same steps on the CPU
#                                                                # build, small figures: checks
#                                                                # the script, not the GPU
# Environment: PYTHON (default .venv/bin/python, else python3), WIDE_FACTORS (default "24 96"),
# CUDA_FLAGS (default -DGGML_CUDA=on), MTP_STUDIO_WHEEL_CACHE, and PYTHONPATH (kept after the
# CUDA build and the checkout: a folder of the app's dependencies on a machine with no venv).
# On a machine whose python already has scikit-build-core, CMake and ninja, PIP_NO_BUILD_ISOLATION=0
# builds with them, so --offline DIR needs only the sdist.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=packaging/build_plan.sh
source packaging/build_plan.sh

REPORT=device-check-report.md
OFFLINE=""
MODE=gpu
while [ $# -gt 0 ]; do
    case "$1" in
        --report) REPORT=$2; shift 2 ;;
        --offline) OFFLINE=$2; shift 2 ;;
        --prepare) MODE=prepare; OFFLINE=$2; shift 2 ;;
        --dry-run) MODE=dry-run; shift ;;
        --cpu) MODE=cpu; shift ;;
        *)
            echo "device_check: unknown option $1; see the top of bench/device_check.sh" >&2
            exit 2
            ;;
    esac
done
if [ -z "${PYTHON:-}" ]; then
    if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
LLAMA_VERSION=$(sed -n 's/.*"llama-cpp-python==\([^"]*\)".*/\1/p' pyproject.toml)
FLAGS=${CUDA_FLAGS:--DGGML_CUDA=on}  # e.g. add -DCMAKE_CUDA_ARCHITECTURES=native: a shorter build
WIDE_FACTORS=${WIDE_FACTORS:-24 96}
DECODE_ARGS=(--repeats 2 --max-tokens 128)
CHAT_ARGS=(--turns 6)
GPU_TESTS=(
    tests/runtime/test_exactness.py
    tests/runtime/test_sampled_exactness.py
    tests/runtime/test_llama_cpp_backend.py
    tests/runtime/test_draft_health.py
    tests/runtime/test_parallel_sequences.py
    tests/chat/test_accelerator.py
)
if [ "$MODE" = cpu ]; then
    FLAGS=""
    WIDE_FACTORS=${WIDE_FACTORS_CPU:-2}
    DECODE_ARGS=(--repeats 1 --max-tokens 16 --depths 1,2)
    CHAT_ARGS=(--turns 2 --history-tokens 300 --max-tokens 8)
    GPU_TESTS=(tests/chat/test_accelerator.py)
fi
WHEELS=$(wheel_cache_dir "$FLAGS")
SITE=$WHEELS/site-$LLAMA_VERSION
step() { echo "device_check: $*" >&2; }
# Each command of the check goes through run: printed by --dry-run, else run.
run() {
    if [ "$MODE" = dry-run ]; then
        printf '  would run:'
        printf ' %q' "$@"
        printf '\n'
    else
        "$@"
    fi
}

if [ "$MODE" = prepare ]; then
    mkdir -p "$OFFLINE"
    step "downloading the llama-cpp-python $LLAMA_VERSION sdist and its build requirements into $OFFLINE"
    "$PYTHON" -m pip download --no-deps --no-binary :all: -d "$OFFLINE" "llama-cpp-python==$LLAMA_VERSION"
    "$PYTHON" -m pip download -d "$OFFLINE" scikit-build-core cmake ninja
    step "done: copy $OFFLINE to the GPU machine and run bench/device_check.sh --offline DIR"
    exit 0
fi

if [ "$MODE" != cpu ]; then
    if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
        if [ "$MODE" = gpu ]; then
            echo "device_check: no NVIDIA GPU here (nvidia-smi lists none); use --cpu to check the script" >&2
            exit 1
        fi
        step "(dry run: no NVIDIA GPU here)"
    fi
fi

# 1. The wheel: reused when cached, else built (offline from --offline DIR).
if ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
    step "reusing the ${FLAGS:-CPU} wheel in $WHEELS"
else
    step "building llama-cpp-python $LLAMA_VERSION with ${FLAGS:-no flags} into $WHEELS"
    offline=()
    [ -z "$OFFLINE" ] || offline=(--no-index --find-links "$OFFLINE")
    run mkdir -p "$WHEELS"
    run env CMAKE_ARGS="$FLAGS" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
        "$PYTHON" -m pip wheel --no-deps --no-cache-dir "${offline[@]}" --wheel-dir "$WHEELS" \
        "llama-cpp-python==$LLAMA_VERSION"
fi
if [ "$MODE" = cpu ]; then
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # the virtualenv's own (CPU) llama-cpp-python
else
    if [ ! -d "$SITE/llama_cpp" ]; then
        run "$PYTHON" -m pip install --quiet --no-deps --target "$SITE" \
            "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl
    fi
    export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
export QT_QPA_PLATFORM=offscreen

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failed=()
# check NAME FILE COMMAND…: runs COMMAND into FILE, remembering NAME when it fails.
check() {
    local name=$1 file=$2
    shift 2
    step "$name"
    if [ "$MODE" = dry-run ]; then
        run "$@"
        return
    fi
    "$@" >"$file" 2>"$file.err" || failed+=("$name")
}

# 2. The build runs on the GPU, and the tests that exercise it.
check "llama.cpp reports its accelerator" "$out/accelerator.txt" "$PYTHON" -c '
import sys
from app.engine.chat.accelerator import probe_accelerator
report = probe_accelerator()
print(report.summary)
print(report.reason or "")
print(report.system_info)
sys.exit(0 if report.running == report.best else 1)'
# pytest with llama.cpp loaded before anything imports numpy: the tests open models in their own
# process, and a CUDA build's first load crashes after numpy (backends/llama_cpp/load_order.py)
check "tests on this build" "$out/tests.txt" "$PYTHON" -c \
    'import llama_cpp, sys, pytest; sys.exit(pytest.main(sys.argv[1:]))' \
    -q -p no:cacheprovider "${GPU_TESTS[@]}"
# 3. bench decode: the demo model, then the stand-ins.
check "bench decode, demo model" "$out/decode-demo.json" \
    "$PYTHON" -m app bench decode "${DECODE_ARGS[@]}" --json
for factor in $WIDE_FACTORS; do
    check "bench decode --wide $factor" "$out/decode-wide$factor.json" \
        "$PYTHON" -m app bench decode "${DECODE_ARGS[@]}" --wide "$factor" --json
done
# 4. TTFT per turn.
check "bench chat (TTFT per turn)" "$out/chat.txt" "$PYTHON" -m app bench chat "${CHAT_ARGS[@]}"
[ "$MODE" != dry-run ] || exit 0

section() {
    local title=$1 file=$2
    echo "## $title"
    echo
    echo '```'
    if [ -s "$file" ] && [[ "$file" == *.json ]]; then
        "$PYTHON" bench/decode_summary.py "$file" || cat "$file"
    elif [ -s "$file" ]; then
        cat "$file"
    fi
    [ ! -s "$file.err" ] || tail -n 15 "$file.err"
    echo '```'
    echo
}
{
    echo "# Device check — $(date -u +%Y-%m-%dT%H:%MZ) ($MODE)"
    echo
    echo "- GPU: $(nvidia-smi -L 2>/dev/null | head -n 1 || true)"
    echo "- driver / CUDA: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1 || true) / $(nvcc --version 2>/dev/null | tail -n 1 || true)"
    echo "- llama-cpp-python $LLAMA_VERSION, CMAKE_ARGS ${FLAGS:-(none)}, wheel in $WHEELS"
    echo "- failed steps: ${failed[*]:-none}"
    echo
    section "llama.cpp's accelerator" "$out/accelerator.txt"
    echo "## Tests on this build (${GPU_TESTS[*]})"
    echo
    echo '```'
    tail -n 5 "$out/tests.txt"
    echo '```'
    echo
    section "bench decode — demo model" "$out/decode-demo.json"
    for factor in $WIDE_FACTORS; do
        section "bench decode — --wide $factor stand-in" "$out/decode-wide$factor.json"
    done
    section "bench chat — TTFT per turn" "$out/chat.txt"
} >"$REPORT"
step "report written to $REPORT"
[ ${#failed[@]} -eq 0 ]
