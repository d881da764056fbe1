"""The demo checkpoint as a `qwen35` GGUF with its nextn (MTP) block, by llama.cpp's converter.

The most faithful GGUF is the one llama.cpp's own `convert_hf_to_gguf.py` writes: it knows every
tensor rename and transform the bundled llama.cpp expects (norms +1, A_log → −exp, conv squeeze,
`mtp.*` → block n_layer with nextn names, recurrent-layer flags, rope sections). So the converter
from the pinned llama-cpp-python source package runs here, unmodified, with its own `gguf-py`, in
a child process. One thing is set rather than detected: the pre-tokenizer. The converter
identifies it by hashing how a known vocabulary splits a probe text, and a freshly trained
vocabulary is known to nobody; our BPE was trained with Qwen3.5's split regex, so it is declared
`qwen35` (demo_model.tokenizer.LLAMA_CPP_PRE_TOKENIZER).

The weights are stored as Q8_0 (llama.cpp's converter, `--outtype q8_0`; norms and small vectors
stay F32). F16 would fit too, but on a CPU this tiny model is compute-bound (its weights sit in
cache), so verifying K+1 drafted tokens costs nearly K+1 plain steps in F16 and MTP cannot pay
off; llama.cpp's Q8_0 kernels batch far better. Measured back to back with `mtp-studio bench
decode --threads 1 --temp 0` on 2 shared cores: a 2-token verify cost 2.02× a plain step in F16
vs 1.26× in Q8_0, and MTP at depth 1 ran at 0.73× vs 1.12× plain-decoding speed, with the same
84% acceptance (the head loses nothing measurable to Q8_0).

Run as a script only through :func:`convert_to_gguf`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
MODEL_NAME = "MTP Studio demo (Qwen3.5 + MTP)"
GGUF_OUTTYPE = "q8_0"


def llama_cpp_source(cache_dir: Path) -> Path:
    """The vendored llama.cpp tree of the pinned llama-cpp-python sdist (fetched once with pip)."""
    tree = cache_dir / f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}" / "vendor" / "llama.cpp"
    if (tree / "convert_hf_to_gguf.py").is_file():
        return tree
    cache_dir.mkdir(parents=True, exist_ok=True)
    archive = cache_dir / f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}.tar.gz"
    if not archive.is_file():
        subprocess.run(
            [
                sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}", "-d", str(cache_dir),
            ],
            check=True,
        )  # fmt: skip
    with tarfile.open(archive) as sdist:
        sdist.extractall(cache_dir, filter="data")
    if not (tree / "convert_hf_to_gguf.py").is_file():
        raise FileNotFoundError(f"{archive} has no vendor/llama.cpp/convert_hf_to_gguf.py")
    return tree


def convert_to_gguf(
    hf_dir: Path,
    output: Path,
    llama_cpp_tree: Path,
    outtype: str,
    *,
    model_name: str = MODEL_NAME,
    mmproj: bool = False,
) -> None:
    """Convert ``hf_dir`` to ``output`` (written under a temporary name, then renamed); with
    ``mmproj``, the checkpoint's vision tower becomes a projector file (``--mmproj``) instead."""
    partial = output.with_name(f".{output.name}.partial")
    partial.unlink(missing_ok=True)
    command = [sys.executable, __file__, str(llama_cpp_tree), str(hf_dir), str(partial), outtype]
    subprocess.run(
        [*command, model_name, "--mmproj" if mmproj else ""],
        check=True,
        env={**os.environ, "PYTHONPATH": ""},
    )
    os.replace(partial, output)


def _run_converter(
    llama_cpp_tree: Path, hf_dir: Path, output: Path, outtype: str, model_name: str, mmproj: bool
) -> None:
    sys.path[:0] = [str(llama_cpp_tree), str(llama_cpp_tree / "gguf-py")]
    import convert_hf_to_gguf
    from conversion.base import TextModel

    from demo_model.tokenizer import LLAMA_CPP_PRE_TOKENIZER

    TextModel.get_vocab_base_pre = lambda self, tokenizer: LLAMA_CPP_PRE_TOKENIZER
    sys.argv = [
        *("convert_hf_to_gguf.py", str(hf_dir), "--outfile", str(output)),
        *("--outtype", outtype, "--model-name", model_name),
        *(["--mmproj"] if mmproj else []),
    ]
    convert_hf_to_gguf.main()


if __name__ == "__main__":
    sys.path[0] = str(Path(__file__).resolve().parents[1])  # tools/, not this module's folder
    tree, source, destination, kind, name, projector = sys.argv[1:7]
    _run_converter(Path(tree), Path(source), Path(destination), kind, name, projector == "--mmproj")
