"""Cross-checks the graft against llama.cpp's own converter on tiny MoE / Next / NextN models.

Not collected by pytest: the converter needs torch, which the project does not install. Run it by
hand when the mapping changes or llama.cpp is upgraded:

    python -m venv /tmp/conv && /tmp/conv/bin/pip install torch transformers safetensors numpy
    pip download llama-cpp-python==<pinned> --no-deps --no-binary :all: (unpack it)
    /tmp/conv/bin/python tests/graft/converter_crosscheck.py make LLAMA_CPP_DIR WORK
    .venv/bin/python tests/graft/converter_crosscheck.py compare WORK

``make`` builds a tiny random checkpoint per architecture with transformers (qwen35moe,
qwen3next, glm4moe, and deepseek2 through GLM-4.7-Flash's Glm4MoeLite, the deepseek2 model the
converter keeps MTP for), appends MTP tensors the way the releases store them, and converts each
twice with the converter (``--outtype q8_0``, with and without ``--no-mtp``; the vocabulary is
skipped, it plays no part). ``compare`` extracts the sidecar with the project's extractor, grafts
it into the ``--no-mtp`` file and asserts every tensor (type, shape, bytes) and every metadata
value equals the converter's own MTP file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ARCHITECTURES = ("qwen35moe", "qwen3next", "glm4moe", "deepseek2")
COSMETIC_KEYS = {"general.size_label", "mtp_studio.graft.alignment_padding"}
"""The converter counts the MTP parameters in the size label; the graft keeps the base's, and
pads its header so the copied data stays page-aligned (app.engine.graft.writer.PADDING_KEY)."""


def _configs() -> dict[str, tuple[str, dict]]:
    qwen_common = {
        "hidden_size": 64,
        "num_hidden_layers": 4,
        "layer_types": ["linear_attention"] * 3 + ["full_attention"],
        "full_attention_interval": 4,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 32,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 32,
        "linear_value_head_dim": 32,
        "linear_conv_kernel_dim": 4,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 32,
        "intermediate_size": 64,
        "vocab_size": 256,
    }
    glm_common = {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "first_k_dense_replace": 1,
        "n_routed_experts": 4,
        "n_shared_experts": 1,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "intermediate_size": 64,
        "num_attention_heads": 2,
        "vocab_size": 256,
        "num_nextn_predict_layers": 1,
        "n_group": 1,
        "topk_group": 1,
    }
    return {
        "qwen35moe": ("Qwen3_5MoeTextConfig", {**qwen_common, "mtp_num_hidden_layers": 1}),
        "qwen3next": ("Qwen3NextConfig", qwen_common),
        "glm4moe": (
            "Glm4MoeConfig",
            {
                **glm_common,
                "num_key_value_heads": 1,
                "head_dim": 32,
                "use_qk_norm": True,
                "attention_bias": True,
            },
        ),
        "deepseek2": (
            "Glm4MoeLiteConfig",
            {
                **glm_common,
                "q_lora_rank": 32,
                "kv_lora_rank": 32,
                "qk_nope_head_dim": 32,
                "qk_rope_head_dim": 32,
                "v_head_dim": 32,
                "num_key_value_heads": 2,
            },
        ),
    }


MODEL_CLASSES = {
    "qwen35moe": "Qwen3_5MoeForCausalLM",
    "qwen3next": "Qwen3NextForCausalLM",
    "glm4moe": "Glm4MoeForCausalLM",
    "deepseek2": "Glm4MoeLiteForCausalLM",
}


def make(llama_cpp: Path, work: Path) -> None:
    import torch
    import transformers
    from safetensors.torch import load_file, save_file

    torch.manual_seed(0)
    for arch, (config_name, values) in _configs().items():
        folder = work / arch
        config = getattr(transformers, config_name)(**values)
        model = getattr(transformers, MODEL_CLASSES[arch])(config).to(torch.bfloat16)
        model.save_pretrained(folder)
        weights_file = folder / "model.safetensors"
        weights = load_file(weights_file)
        last = config.num_hidden_layers - 1
        prefix = f"model.layers.{last}."
        hidden = config.hidden_size
        layer = {k[len(prefix) :]: v for k, v in weights.items() if k.startswith(prefix)}

        def noisy(t: torch.Tensor) -> torch.Tensor:
            return (t.float() + 0.01 * torch.randn_like(t.float())).to(torch.bfloat16)

        def norm(offset: float, size: int = hidden) -> torch.Tensor:
            return (offset + 0.05 * torch.randn(size)).to(torch.bfloat16)

        if arch.startswith("qwen"):  # offset-style norms, top-level mtp.*
            extra = {f"mtp.layers.0.{k}": noisy(v) for k, v in layer.items()}
            for k in list(extra):
                if k.endswith("norm.weight"):
                    extra[k] = norm(0.0, extra[k].shape[0])
            extra["mtp.fc.weight"] = noisy(torch.zeros(hidden, 2 * hidden))
            for name in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"):
                extra[f"mtp.{name}.weight"] = norm(0.0)
        else:  # absolute norms, model.layers.{num_hidden_layers}.*
            n = config.num_hidden_layers
            extra = {f"model.layers.{n}.{k}": noisy(v) for k, v in layer.items()}
            extra[f"model.layers.{n}.eh_proj.weight"] = noisy(torch.zeros(hidden, 2 * hidden))
            for name in ("enorm", "hnorm", "shared_head.norm"):
                extra[f"model.layers.{n}.{name}.weight"] = norm(1.0)
            vocab = config.vocab_size
            extra[f"model.layers.{n}.embed_tokens.weight"] = noisy(torch.zeros(vocab, hidden))
            extra[f"model.layers.{n}.shared_head.head.weight"] = noisy(torch.zeros(vocab, hidden))
        save_file({**weights, **extra}, weights_file, metadata={"format": "pt"})
        for variant, flags in (("full", []), ("trunk", ["--no-mtp"])):
            out = work / f"{arch}-{variant}.gguf"
            command = [
                sys.executable,
                __file__,
                "convert",
                str(llama_cpp),
                str(folder),
                "--outtype",
                "q8_0",
                "--outfile",
                str(out),
                *flags,
            ]
            subprocess.run(command, check=True)


def convert(llama_cpp: Path, argv: list[str]) -> None:
    """The converter's own main(), with the vocabulary step skipped (the models have none)."""
    sys.path[:0] = [str(llama_cpp), str(llama_cpp / "gguf-py")]
    import convert_hf_to_gguf  # type: ignore[import-not-found]
    from conversion import base  # type: ignore[import-not-found]

    def no_vocab(self: object) -> None:
        return None

    for cls in (base.ModelBase, base.TextModel):
        for name in list(vars(cls)):
            if name == "set_vocab" or name.startswith("_set_vocab"):
                setattr(cls, name, no_vocab)
    sys.argv = ["convert_hf_to_gguf.py", *argv]
    convert_hf_to_gguf.main()


def compare(work: Path) -> int:
    import numpy as np
    from gguf import GGUFReader

    from app.engine.graft import graft_mtp
    from app.engine.mtp import LocalFolderSource, extract_mtp

    failures = 0
    for arch in ARCHITECTURES:
        sidecar = work / f"{arch}-mtp.safetensors"
        extract_mtp(LocalFolderSource(work / arch), sidecar)
        out = work / f"{arch}-grafted.gguf"
        result = graft_mtp(work / f"{arch}-trunk.gguf", sidecar, out)
        converted, grafted = GGUFReader(work / f"{arch}-full.gguf"), GGUFReader(out)
        expected = {t.name: t for t in converted.tensors}
        got = {t.name: t for t in grafted.tensors}
        problems = [f"missing {n}" for n in sorted(set(expected) - set(got))]
        problems += [f"extra {n}" for n in sorted(set(got) - set(expected))]
        for name in sorted(set(expected) & set(got)):
            a, b = expected[name], got[name]
            if a.tensor_type != b.tensor_type or list(a.shape) != list(b.shape):
                problems.append(
                    f"{name}: {a.tensor_type.name}{list(a.shape)} vs "
                    f"{b.tensor_type.name}{list(b.shape)}"
                )
            elif not np.array_equal(np.asarray(a.data), np.asarray(b.data)):
                problems.append(f"{name}: bytes differ")
        fields_a = {
            k: f.contents() for k, f in converted.fields.items() if not k.startswith("GGUF.")
        }
        fields_b = {k: f.contents() for k, f in grafted.fields.items() if not k.startswith("GGUF.")}
        for key in sorted((set(fields_a) | set(fields_b)) - COSMETIC_KEYS):
            if fields_a.get(key) != fields_b.get(key):
                problems.append(f"metadata {key}: {fields_a.get(key)!r} vs {fields_b.get(key)!r}")
        head = [n for n in expected if n.startswith(f"blk.{result.trunk_blocks}.")]
        status = "identical" if not problems else f"{len(problems)} difference(s)"
        print(
            json.dumps(
                {
                    "arch": arch,
                    "head_tensors": len(head),
                    "norms": result.norm_style,
                    "result": status,
                }
            )
        )
        for problem in problems:
            print("   ", problem)
        failures += bool(problems)
    return failures


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(Path(sys.argv[2]), Path(sys.argv[3]))
    elif sys.argv[1] == "convert":
        convert(Path(sys.argv[2]), sys.argv[3:])
    else:
        sys.exit(compare(Path(sys.argv[2])))
