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
# plan_build sets: PLAN_BUILD (CPU, CUDA, Metal, ROCm, Vulkan or custom), PLAN_FLAGS (the
# CMAKE_ARGS to build with; empty for the CPU), PLAN_REASON (why), PLAN_HINTS (lines, may be
# empty), PLAN_ENV (extra "NAME=value" words for the build, ROCm only).

VULKAN_HEADERS_NEEDED=272 # llama.cpp's Vulkan backend uses VK_EXT_layer_settings (1.3.272)

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

# The wheel folder of a build: keyed by its flags, so a CPU wheel is never reused for a GPU
# build (the CPU key is the hash of "cpu", as before plans existed: cached CPU wheels stay valid).
wheel_cache_dir() {
    local key
    key=$(printf '%s' "${1:-cpu}" | sha256sum | cut -c1-12)
    printf '%s/%s\n' "${MTP_STUDIO_WHEEL_CACHE:-$HOME/.cache/mtp-studio/wheels}" "$key"
}
