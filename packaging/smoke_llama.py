"""Proves that a llama.cpp build runs here: 4 tokens from the demo model.

Run by ``packaging/install_llama_cpp.sh`` (the installed llama-cpp-python) and
``packaging/build_llama_server.sh`` (``--server BINARY``) in a subprocess after a build. A build
that uses an instruction this CPU does not run does not fail politely: its process dies by
SIGILL, which the scripts read from this one's exit status (128 + the signal's number) and answer
with another build. The CPU code is loaded the way the app loads it (``cpu_backends.py`` of the
llama.cpp backend, read from the checkout by its path: the app itself may not be installed yet).

    python packaging/smoke_llama.py                  # exit 0: 4 tokens; 128+N: died by signal N
    python packaging/smoke_llama.py --expect-gpu     # exit 3 as well when llama.cpp has no GPU
    python packaging/smoke_llama.py --list-variants [DIR]   # a portable build's CPU variants
                                                            # (default: the installed package's)
    python packaging/smoke_llama.py --server BINARY  # the same through llama-server
    MTP_STUDIO_CPU_VARIANT=haswell python packaging/smoke_llama.py   # with that variant
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
DEMO_MODEL = ROOT / "resources" / "models" / "demo-mtp.gguf"
CPU_BACKENDS = ROOT / "app" / "engine" / "runtime" / "backends" / "llama_cpp" / "cpu_backends.py"
PROMPT = "def reverse(s):"
TOKENS = 4
NO_GPU = 3
SERVER_START_SECONDS = 120


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expect-gpu", action="store_true", help="fail when no GPU is usable")
    parser.add_argument("--list-variants", nargs="?", const="", metavar="DIR", help="list them")
    parser.add_argument("--server", type=Path, metavar="BINARY", help="run llama-server")
    parser.add_argument("--model", type=Path, default=DEMO_MODEL, help="the GGUF to run")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))  # app.engine.errors, for the module below
    cpu_backends = _module_at(CPU_BACKENDS)
    if args.list_variants is not None:
        folder = Path(args.list_variants) if args.list_variants else None
        for variant in cpu_backends.runnable_variants(folder or cpu_backends.installed_folder()):
            print(variant.name)
        return 0
    if args.server is not None:
        return _smoke_server(args.server, args.model)
    return _smoke_library(cpu_backends, args.model, args.expect_gpu)


def _smoke_library(cpu_backends: ModuleType, model_path: Path, expect_gpu: bool) -> int:
    import llama_cpp

    variant = cpu_backends.load_installed()
    llama_cpp.llama_backend_init()
    if expect_gpu and not llama_cpp.llama_supports_gpu_offload():
        print(
            f"smoke: this llama.cpp build ({cpu_backends.installed_folder()}) has no GPU "
            "backend: it was built without the GPU toolkit, or the GPU's driver is not loaded",
            file=sys.stderr,
        )
        return NO_GPU
    model = llama_cpp.Llama(str(model_path), n_ctx=256, n_gpu_layers=-1, verbose=False)
    reply = model.create_completion(PROMPT, max_tokens=TOKENS, temperature=0.0)
    generated = reply["usage"]["completion_tokens"]
    if generated < 1:
        print(f"smoke: llama.cpp generated nothing from {model_path.name}", file=sys.stderr)
        return 1
    cpu = f"CPU variant {variant.name}" if variant is not None else "native CPU code"
    print(f"smoke: {generated} tokens from {model_path.name} with llama.cpp's {cpu}")
    return 0


def _smoke_server(binary: Path, model_path: Path) -> int:
    """4 tokens from llama-server; a server that dies by a signal passes the signal on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [str(binary), "-m", str(model_path), "--host", "127.0.0.1", "--port", str(port)]
    with tempfile.TemporaryFile() as log:
        server = subprocess.Popen([*command, "-c", "256"], stdout=log, stderr=log)
        try:
            generated = _four_tokens(server, f"http://127.0.0.1:{port}")
        finally:
            server.terminate()
            server.wait(timeout=30)
        if generated is None:
            log.seek(0)
            tail = log.read().decode(errors="replace")[-2000:]
            code = server.returncode
            if code is not None and code < 0:
                print(f"smoke: llama-server died by {signal.Signals(-code).name}", file=sys.stderr)
                return 128 - code
            print(f"smoke: llama-server did not answer:\n{tail}", file=sys.stderr)
            return 1
    print(f"smoke: {generated} tokens from {model_path.name} with {binary}")
    return 0


def _four_tokens(server: subprocess.Popen[bytes], url: str) -> int | None:
    """The tokens llama-server generated, None when it exited or never answered."""
    body = json.dumps({"prompt": PROMPT, "n_predict": TOKENS, "temperature": 0}).encode()
    deadline = time.monotonic() + SERVER_START_SECONDS
    while time.monotonic() < deadline and server.poll() is None:
        try:
            request = urllib.request.Request(f"{url}/completion", data=body)
            with urllib.request.urlopen(request, timeout=60) as reply:
                return int(json.loads(reply.read())["tokens_predicted"])
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.2)  # still loading (503), or not listening yet
    return None


def _module_at(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # dataclasses look their module up while the body runs
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    sys.exit(main())
