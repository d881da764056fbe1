#!/usr/bin/env bash
# Installs into PYTHON's environment a llama-cpp-python that runs on this machine, and proves it.
#
#   bash packaging/install_llama_cpp.sh PYTHON [--portable]      # run by packaging/setup.sh
#
# 1. The build planned for this machine (build_plan.sh; --portable: with portable CPU code), its
#    wheel built once and cached.
# 2. A 4-token generation with the demo model in a subprocess (packaging/smoke_llama.py).
# 3. If that dies by a signal (SIGILL: the library holds an instruction this CPU does not run,
#    such as -march=native code from a CPU with more extensions, or one a VM advertises and then
#    faults on), the portable build instead, said in one line with the reason.
# 4. If the portable build's best CPU variant dies as well (the CPU claims an extension the
#    variant uses and faults on it, as AMX in some VMs), the next variants down are tried and the
#    ones that died are removed from this install, said in one line.
# A smoke run that fails without a signal (a GPU build that finds no GPU, a damaged install)
# stops here with its message. Environment: as build_plan.sh (CMAKE_ARGS, MTP_STUDIO_WHEEL_CACHE,
# MTP_STUDIO_CPUINFO) and pip's own (PIP_INDEX_URL, PIP_FIND_LINKS…).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=packaging/build_plan.sh
source packaging/build_plan.sh

PYTHON=${1:?usage: install_llama_cpp.sh PYTHON [--portable]}
CPU_CODE=""
case "${2:-}" in
    --portable) CPU_CODE=portable ;;
    "") ;;
    *)
        echo "setup: unknown option ${2}; use no option or --portable" >&2
        exit 2
        ;;
esac

plan_build $CPU_CODE
printf '%s' "$PLAN_HINTS"
echo "setup: llama.cpp build $PLAN_BUILD with $PLAN_CPU CPU code — $PLAN_REASON"
SMOKE_OPTIONS=()
case "$PLAN_BUILD" in
    CPU | custom) ;;
    *) SMOKE_OPTIONS=(--expect-gpu) ;; # a GPU build that cannot reach the GPU is no GPU build
esac

install_planned() {
    local wheel
    wheel=$(ensure_wheel "$PYTHON" "$PLAN_FLAGS" "$PLAN_ENV")
    # This build replaces whichever build was installed (same version, other flags); then its
    # dependencies, which a forced reinstall would needlessly reinstall too.
    "$PYTHON" -m pip install --quiet --no-deps --force-reinstall "$wheel"
    "$PYTHON" -m pip install --quiet "$wheel"
}

# smoke [VARIANT]: the 4-token run, with a portable build's CPU variant forced to VARIANT;
# SMOKE_STATUS is its exit status (128 + N: killed by signal N).
smoke() {
    SMOKE_STATUS=0
    # No core file in the working folder when it dies.
    (ulimit -c 0 && MTP_STUDIO_CPU_VARIANT=${1:-} "$PYTHON" packaging/smoke_llama.py \
        ${SMOKE_OPTIONS[@]+"${SMOKE_OPTIONS[@]}"}) || SMOKE_STATUS=$?
}

signal_name() { echo "SIG$(kill -l $((SMOKE_STATUS - 128)))"; }

stop_unless_signal() {
    if [ "$SMOKE_STATUS" -le 128 ]; then
        echo "setup: the llama.cpp build just installed fails its 4-token test (exit status $SMOKE_STATUS, see above)" >&2
        exit 1
    fi
}

install_planned
smoke
[ "$SMOKE_STATUS" -eq 0 ] && exit 0
stop_unless_signal

if [ "$PLAN_CPU" = native ]; then
    echo "setup: the native llama.cpp build died by $(signal_name) in a 4-token test: it holds an instruction this CPU does not run (built on a CPU with more extensions, or one this VM advertises and faults on); installing the portable build instead, its CPU variant picked at load"
    plan_build portable
    install_planned
    smoke
    [ "$SMOKE_STATUS" -eq 0 ] && exit 0
    stop_unless_signal
fi

died=$(signal_name)
if [ "$PLAN_CPU" != portable ]; then
    echo "setup: the llama.cpp build with your CMAKE_ARGS died by $died in a 4-token test: it holds an instruction this CPU does not run; name fewer instruction sets, or unset CMAKE_ARGS" >&2
    exit 1
fi
# The portable build's best variant died: walk down the others until one runs.
variants=()
while IFS= read -r variant; do variants+=("$variant"); done \
    < <("$PYTHON" packaging/smoke_llama.py --list-variants)
for index in "${!variants[@]}"; do
    [ "$index" -gt 0 ] || continue
    smoke "${variants[$index]}"
    if [ "$SMOKE_STATUS" -eq 0 ]; then
        folder=$("$PYTHON" -c 'import importlib.util, pathlib
print(pathlib.Path(importlib.util.find_spec("llama_cpp").origin).parent / "lib")')
        for dead in "${variants[@]:0:index}"; do
            rm -f "$folder"/libggml-cpu-"$dead".so "$folder"/ggml-cpu-"$dead".dll
        done
        echo "setup: llama.cpp's ${variants[*]:0:index} CPU variant(s) died by $died here although this CPU claims their instruction sets (as AMX in some VMs); removed them from this install, so llama.cpp uses ${variants[$index]}"
        exit 0
    fi
    stop_unless_signal
done
echo "setup: no CPU variant of llama.cpp runs on this CPU: each died by a signal in a 4-token test (the best by $died)" >&2
exit 1
