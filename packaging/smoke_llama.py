"""Proves that the installed llama-cpp-python runs here: 4 tokens from the demo model.

Run by ``packaging/install_llama_cpp.sh`` in a subprocess after it installs a build. A build that
uses an instruction this CPU does not run does not fail politely: its process dies by SIGILL,
which set-up reads from the exit status (128 + the signal's number) and answers with another
build. The CPU code is loaded the way the app loads it (``cpu_backends.py`` of the llama.cpp
backend, read from the checkout by its path: the app itself may not be installed yet).

    python packaging/smoke_llama.py                  # exit 0: 4 tokens; a signal: a crash
    python packaging/smoke_llama.py --expect-gpu     # exit 3 as well when llama.cpp has no GPU
    python packaging/smoke_llama.py --list-variants  # a portable build's CPU variants, best first
    MTP_STUDIO_CPU_VARIANT=haswell python packaging/smoke_llama.py   # with that variant
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
DEMO_MODEL = ROOT / "resources" / "models" / "demo-mtp.gguf"
CPU_BACKENDS = ROOT / "app" / "engine" / "runtime" / "backends" / "llama_cpp" / "cpu_backends.py"
TOKENS = 4
NO_GPU = 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expect-gpu", action="store_true", help="fail when no GPU is usable")
    parser.add_argument("--list-variants", action="store_true", help="print the CPU variants")
    parser.add_argument("--model", type=Path, default=DEMO_MODEL, help="the GGUF to run")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))  # app.engine.errors, for the module below
    cpu_backends = _module_at(CPU_BACKENDS)
    import llama_cpp

    folder = cpu_backends.installed_folder()
    if args.list_variants:
        for variant in cpu_backends.runnable_variants(folder):
            print(variant.name)
        return 0
    variant = cpu_backends.load_installed()
    llama_cpp.llama_backend_init()
    if args.expect_gpu and not llama_cpp.llama_supports_gpu_offload():
        print(
            f"smoke: this llama.cpp build ({folder}) has no GPU backend: it was built without "
            "the GPU toolkit, or the GPU's driver is not loaded",
            file=sys.stderr,
        )
        return NO_GPU
    model = llama_cpp.Llama(str(args.model), n_ctx=256, n_gpu_layers=-1, verbose=False)
    reply = model.create_completion("def reverse(s):", max_tokens=TOKENS, temperature=0.0)
    generated = reply["usage"]["completion_tokens"]
    if generated < 1:
        print(f"smoke: llama.cpp generated nothing from {args.model.name}", file=sys.stderr)
        return 1
    cpu = f"CPU variant {variant.name}" if variant is not None else "native CPU code"
    print(f"smoke: {generated} tokens from {args.model.name} with llama.cpp's {cpu}")
    return 0


def _module_at(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # dataclasses look their module up while the body runs
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    sys.exit(main())
