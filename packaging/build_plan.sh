# shellcheck shell=bash
# Which llama-cpp-python build this machine should get, and where its wheel is cached.
#
# Sourced by packaging/setup.sh and the bench scripts. A new user with a GPU should get a GPU
# build without knowing the CMake flag, so plan_build looks for an accelerator and its toolkit:
#   macOS on arm64                    → Metal  (-DGGML_METAL=on)
#   nvidia-smi lists a GPU + nvcc     → CUDA   (-DGGML_CUDA=on)
#   hipconfig (ROCm toolkit)          → ROCm   (-DGGML_HIP=on, HIPCXX/HIP_PATH from hipconfig)
#   vulkaninfo shows a GPU + glslc    → Vulkan (-DGGML_VULKAN=on; Vulkan headers 1.3.272+ in
#                                       $VULKAN_SDK/include or /usr/include)
# Everything is found through commands on PATH (and uname), so a test can fake a machine.
# A GPU whose toolkit is missing adds one line to PLAN_HINTS saying what to install, and the
# plan falls through to the next candidate (finally the CPU). CMAKE_ARGS, when set, wins.
#
#
# The CPU code of every build is either native (llama.cpp's default, -march=native: fastest, but
# only for CPUs with at least this one's instruction sets, so its wheel is cached under a key that
# includes them) or portable (`plan_build portable`: PORTABLE_FLAGS, one libggml-cpu-<variant>
# per micro-architecture, the best one the CPU runs picked when the app loads llama.cpp).
#
# plan_build [portable] sets: PLAN_BUILD (CPU, CUDA, Metal, ROCm, Vulkan or custom), PLAN_FLAGS
# (the CMAKE_ARGS to build with; empty for the native CPU build), PLAN_REASON (why), PLAN_HINTS
# (lines, may be empty), PLAN_ENV (extra "NAME=value" words for the build, ROCm only), PLAN_CPU
# (native, portable, or as-given: CMAKE_ARGS with GGML_NATIVE=OFF).

VULKAN_HEADERS_NEEDED=272 # llama.cpp's Vulkan backend uses VK_EXT_layer_settings (1.3.272)
# No -march=native; the CPU backend built once per micro-architecture as a module loaded at run
# time, installed beside libllama (CMake's default is site-packages/bin, where nothing looks) and
# finding the libggml-base it links to there ($ORIGIN) when loaded on its own.
PORTABLE_FLAGS="-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON -DCMAKE_INSTALL_BINDIR=llama_cpp/lib -DCMAKE_INSTALL_RPATH=\$ORIGIN"
# The instruction-set flags of /proc/cpuinfo that -march=native can compile for (x86); an ARM
# CPU's "Features" line lists nothing else, so it is kept whole.
X86_ISA_FLAGS='^(sse[0-9a-z_]*|ssse3|pni|avx[0-9a-z_]*|amx[0-9a-z_]*|fma4?|f16c|bmi[12]|abm|popcnt|movbe|aes|vaes|pclmulqdq|vpclmulqdq|gfni|sha_ni|xop|adx|cx16)$'

_has() { command -v "$1" >/dev/null 2>&1; }

# The GPUs nvidia-smi lists ("GPU 0: NVIDIA H100 …"); empty when the driver is not working.
_nvidia_gpus() { _has nvidia-smi && nvidia-smi -L 2>/dev/null | grep '^GPU ' || true; }

# The Vulkan devices that are GPUs (a software device such as Mesa's lavapipe is not one).
_vulkan_gpus() {
    _has vulkaninfo || return 0
    vulkaninfo --summary 2>/dev/null | awk '
        /deviceType/ { type = $NF }
        /deviceName/ { sub(/^[^=]*= */, ""); if (type ~ /(DISCRETE|INTEGRATED|VIRTUAL)_GPU/) print; type = "" }' || true
}

plan_build() {
    _plan_accelerator
    PLAN_CPU=native
    if [ "${1:-}" = portable ]; then
        PLAN_CPU=portable
        PLAN_FLAGS="${PLAN_FLAGS:+$PLAN_FLAGS }$PORTABLE_FLAGS"
    elif ! _is_native "$PLAN_FLAGS"; then
        PLAN_CPU=as-given # CMAKE_ARGS with GGML_NATIVE=OFF name the instruction sets
    fi
}

# Whether CMake flags leave llama.cpp's GGML_NATIVE at its default (ON).
_is_native() {
    ! printf '%s' "$1" | grep -Eqi -- '-DGGML_NATIVE(:BOOL)?=(OFF|0|FALSE|NO)( |$)'
}

_plan_accelerator() {
    PLAN_HINTS=""
    PLAN_ENV=""
    if [ -n "${CMAKE_ARGS:-}" ]; then
        PLAN_BUILD=custom
        PLAN_FLAGS=$CMAKE_ARGS
        PLAN_REASON="CMAKE_ARGS is set, so it is used as given (unset it to let setup choose)"
        return
    fi
    if [ "$(uname -s)" = Darwin ] && [ "$(uname -m)" = arm64 ]; then
        PLAN_BUILD=Metal
        PLAN_FLAGS="-DGGML_METAL=on"
        PLAN_REASON="macOS on Apple silicon"
        return
    fi
    local nvidia vulkan
    nvidia=$(_nvidia_gpus | head -n 1)
    if [ -n "$nvidia" ]; then
        if _has nvcc; then
            PLAN_BUILD=CUDA
            PLAN_FLAGS="-DGGML_CUDA=on"
            PLAN_REASON="nvidia-smi lists ${nvidia%% (UUID*} and nvcc (the CUDA toolkit) is on PATH"
            return
        fi
        PLAN_HINTS+="setup: an NVIDIA GPU was found (${nvidia%% (UUID*}) but not the CUDA toolkit (nvcc); install it (apt: nvidia-cuda-toolkit · dnf: cuda-toolkit · winget: Nvidia.CUDA) and run setup again to use the GPU"$'\n'
    fi
    if _has hipconfig; then
        PLAN_BUILD=ROCm
        PLAN_FLAGS="-DGGML_HIP=on"
        PLAN_ENV="HIPCXX=$(hipconfig -l)/clang HIP_PATH=$(hipconfig -R)"
        PLAN_REASON="hipconfig (the ROCm toolkit) is on PATH"
        return
    fi
    if _has rocm-smi || _has rocminfo; then
        PLAN_HINTS+="setup: ROCm tools were found but not hipconfig (the HIP toolkit); install it (apt: hipcc rocm-dev · dnf: rocm-hip-devel · Windows: AMD HIP SDK) and run setup again, or the Vulkan packages below"$'\n'
    fi
    vulkan=$(_vulkan_gpus | head -n 1)
    if [ -n "$vulkan" ]; then
        local headers=${VULKAN_SDK:+$VULKAN_SDK/include}
        headers=${headers:-/usr/include}
        local version
        version=$(sed -n 's/^#define VK_HEADER_VERSION \([0-9]*\).*/\1/p' "$headers/vulkan/vulkan_core.h" 2>/dev/null || true)
        if _has glslc && [ "${version:-0}" -ge "$VULKAN_HEADERS_NEEDED" ]; then
            PLAN_BUILD=Vulkan
            PLAN_FLAGS="-DGGML_VULKAN=on"
            PLAN_REASON="vulkaninfo lists the GPU $vulkan and glslc (the shader compiler) is on PATH"
            return
        fi
        local missing="glslc"
        [ -n "$version" ] || missing="the Vulkan headers"
        [ -z "$version" ] || [ "$version" -ge "$VULKAN_HEADERS_NEEDED" ] \
            || missing="Vulkan headers 1.3.$VULKAN_HEADERS_NEEDED or newer (found 1.3.$version in $headers; Debian 12's are too old: use the LunarG Vulkan SDK and set VULKAN_SDK)"
        _has glslc || missing="glslc"
        PLAN_HINTS+="setup: a Vulkan GPU was found ($vulkan) but not the Vulkan SDK ($missing); install it (apt: glslc libvulkan-dev spirv-headers · dnf: glslc vulkan-loader-devel spirv-headers-devel · winget: KhronosGroup.VulkanSDK) and run setup again to use the GPU"$'\n'
    fi
    PLAN_BUILD=CPU
    PLAN_FLAGS=""
    if [ -n "$PLAN_HINTS" ]; then
        PLAN_REASON="a GPU was found but not its toolkit (see above)"
    else
        PLAN_REASON="no GPU found (nvidia-smi lists none, no hipconfig, vulkaninfo shows no GPU, not Apple silicon)"
    fi
}

# This CPU's instruction sets, one line: what a native build compiles for. MTP_STUDIO_CPUINFO
# names another file than /proc/cpuinfo (a test's fake CPU); macOS, which has none, gives its
# CPU's name.
cpu_features() {
    local cpuinfo=${MTP_STUDIO_CPUINFO:-/proc/cpuinfo}
    if [ -r "$cpuinfo" ]; then
        local x86 arm
        x86=$(sed -n 's/^flags[[:space:]]*:[[:space:]]*//p' "$cpuinfo" | head -n 1)
        arm=$(sed -n 's/^Features[[:space:]]*:[[:space:]]*//p' "$cpuinfo" | head -n 1)
        if [ -n "$x86" ]; then
            printf '%s\n' $x86 | { grep -E "$X86_ISA_FLAGS" || true; } | LC_ALL=C sort -u | tr '\n' ' ' | sed 's/ $//'
        else
            printf '%s\n' $arm | LC_ALL=C sort -u | tr '\n' ' ' | sed 's/ $//'
        fi
    elif _has sysctl; then
        sysctl -n machdep.cpu.brand_string 2>/dev/null || true
    fi
}

# The wheel folder of a build: keyed by its flags, so a CPU wheel is never reused for a GPU
# build, and for a native build also by this CPU's instruction sets, so a wheel built on another
# CPU (a home folder or image copied between machines) is never reused for this one.
wheel_cache_dir() {
    printf '%s/%s\n' "${MTP_STUDIO_WHEEL_CACHE:-$HOME/.cache/mtp-studio/wheels}" "$(build_key "${1:-}")"
}

# The cache key of a build with CMake flags FLAGS (see wheel_cache_dir).
build_key() {
    local identity=${1:-cpu}
    if _is_native "${1:-}"; then
        identity+=$'\n'"cpu: $(cpu_features)"
    fi
    printf '%s' "$identity" | sha256sum | cut -c1-12
}

# The llama-cpp-python version pyproject.toml pins (run from the repository root).
llama_version() { sed -n 's/.*"llama-cpp-python==\([^"]*\)".*/\1/p' pyproject.toml; }

# ensure_wheel PYTHON FLAGS [ENV]: prints the path of the cached wheel of the build with CMake
# FLAGS (and extra NAME=value words ENV), building it first when it is missing. pip's own wheel
# cache is bypassed: it keys a build on its source alone, not on CMAKE_ARGS, so it would hand
# back whichever build came first. The wheel is built in a private folder and then moved in, so
# an interrupted build leaves no half-written wheel in the cache.
ensure_wheel() {
    local python=$1 flags=$2 env_words=${3:-} version wheels wheel building
    version=$(llama_version)
    wheels=$(wheel_cache_dir "$flags")
    wheel=$(ls "$wheels"/llama_cpp_python-"$version"-*.whl 2>/dev/null | head -n 1 || true)
    if [ -z "$wheel" ]; then
        echo "setup: building llama-cpp-python $version from source with CMAKE_ARGS=${flags:-(none)} (once; see docs/install.md for how long)" >&2
        mkdir -p "$wheels"
        building=$(mktemp -d "$wheels/.building.XXXXXX")
        # shellcheck disable=SC2086  # ENV is NAME=value words
        if ! env $env_words CMAKE_ARGS="$flags" \
            CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}" \
            "$python" -m pip wheel --no-deps --no-cache-dir --wheel-dir "$building" \
            "llama-cpp-python==$version" >&2; then
            rm -rf "$building"
            return 1
        fi
        mv "$building"/llama_cpp_python-"$version"-*.whl "$wheels"/
        rm -rf "$building"
        wheel=$(ls "$wheels"/llama_cpp_python-"$version"-*.whl | head -n 1)
    fi
    printf '%s\n' "$wheel"
}
