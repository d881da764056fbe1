"""Grafts that must be refused — with the tensor or field and both values named — and leave no
output file (and no temporary file) behind."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from gguf import GGUFWriter

from app.engine.errors import GraftError, JobCancelled
from app.engine.graft import graft_mtp
from app.engine.jobs import JobContext, JobEvent, ProgressEvent
from tests.graft.bases import DEMO_GGUF
from tests.graft.sidecars import QWEN_HEAD_SHAPES, write_bf16_sidecar


def _refused(base: Path, sidecar: Path, out: Path, **options: object) -> str:
    before = sorted(out.parent.iterdir())
    with pytest.raises(GraftError) as refused:
        graft_mtp(base, sidecar, out, **options)  # type: ignore[arg-type]
    assert not out.exists()
    assert sorted(out.parent.iterdir()) == before  # no temporary file either
    return str(refused.value)


@pytest.mark.slow
def test_the_demo_shaped_test_sidecar_is_accepted(
    graft_files: dict[str, Path], tmp_path: Path
) -> None:
    """The shapes the refusal cases start from are right, so each refusal is about its change."""
    sidecar = write_bf16_sidecar(tmp_path / "same.safetensors", QWEN_HEAD_SHAPES)
    out = tmp_path / "out" / "ok.gguf"
    out.parent.mkdir()
    assert graft_mtp(graft_files["trunk_q8"], sidecar, out).head_tensors == 15


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"mtp.fc.weight": (128, 256), "mtp.pre_fc_norm_embedding.weight": (128,)},
            "hidden size differs: the sidecar's mtp.fc.weight is [128, 256], i.e. hidden size 128,"
            " but the base's qwen35.embedding_length is 256",
        ),
        (
            {"mtp.layers.0.mlp.up_proj.weight": (1024, 256)},
            "shape differs: the sidecar's mtp.layers.0.mlp.up_proj.weight becomes "
            "blk.8.ffn_up.weight with GGUF dims [256, 1024], but the base's blk.7.ffn_up.weight "
            "has [256, 768]",
        ),
        (
            {"mtp.layers.0.self_attn.k_proj.weight": (256, 256)},
            "the base's blk.7.attn_k.weight has [256, 128] (head count × head size; the base has "
            "qwen35.attention.head_count = 4, qwen35.attention.head_count_kv = 2, "
            "qwen35.attention.key_length = 64)",
        ),
    ],
    ids=["hidden-size", "ffn-width", "kv-heads"],
)
def test_another_models_sidecar_is_refused_naming_the_tensor_and_both_shapes(
    graft_files: dict[str, Path], tmp_path: Path, changes: dict, expected: str
) -> None:
    sidecar = write_bf16_sidecar(tmp_path / "other.safetensors", {**QWEN_HEAD_SHAPES, **changes})
    out = tmp_path / "out" / "grafted.gguf"
    out.parent.mkdir()
    message = _refused(graft_files["trunk_q8"], sidecar, out)
    assert expected in message
    assert "belongs to another model" in message


def test_a_sidecar_missing_a_tensor_is_refused(
    graft_files: dict[str, Path], tmp_path: Path
) -> None:
    shapes = dict(QWEN_HEAD_SHAPES)
    del shapes["mtp.layers.0.self_attn.k_norm.weight"]
    sidecar = write_bf16_sidecar(tmp_path / "partial.safetensors", shapes)
    message = _refused(graft_files["trunk_q8"], sidecar, tmp_path / "grafted.gguf")
    assert "lacks tensors for block 8" in message and "attn_k_norm.weight" in message


def test_a_nextn_family_sidecar_is_refused_for_a_qwen_base(
    graft_files: dict[str, Path], tmp_path: Path
) -> None:
    sidecar = write_bf16_sidecar(
        tmp_path / "ds.safetensors", {"model.layers.8.eh_proj.weight": (256, 512)}
    )
    message = _refused(graft_files["trunk_q8"], sidecar, tmp_path / "grafted.gguf")
    assert "model.layers.8.eh_proj.weight is not a Qwen MTP tensor" in message


def test_a_base_that_already_has_a_head_is_refused_without_replace(
    graft_files: dict[str, Path], tmp_path: Path
) -> None:
    message = _refused(DEMO_GGUF, graft_files["sidecar_fp8"], tmp_path / "grafted.gguf")
    assert message == (
        "demo-mtp.gguf already has 1 MTP block(s) (qwen35.nextn_predict_layers = 1); pass "
        "--replace (replace=True) to swap in the sidecar's head"
    )


def test_a_truncated_base_is_refused_with_both_sizes(
    graft_files: dict[str, Path], tmp_path: Path
) -> None:
    whole = graft_files["trunk_q8"].read_bytes()
    base = tmp_path / "cut.gguf"
    base.write_bytes(whole[:-4096])
    out = tmp_path / "out" / "grafted.gguf"
    out.parent.mkdir()
    message = _refused(base, graft_files["sidecar_fp8"], out)
    assert message.startswith(f"{base} is truncated: its tensor table needs {len(whole)} bytes")
    assert f"the file has {len(whole) - 4096}" in message


def test_a_base_cut_inside_its_header_is_refused(
    graft_files: dict[str, Path], tmp_path: Path
) -> None:
    base = tmp_path / "stub.gguf"
    base.write_bytes(graft_files["trunk_q8"].read_bytes()[:1000])
    message = _refused(base, graft_files["sidecar_fp8"], tmp_path / "grafted.gguf")
    assert (
        message
        == f"{base} is not a readable GGUF file (it ends inside its header); download it again"
    )


def test_too_little_disk_is_refused_before_writing(
    graft_files: dict[str, Path], tmp_path: Path
) -> None:
    seen: list[Path] = []

    def free(folder: Path) -> int:
        seen.append(folder)
        return 5_000_000

    message = _refused(
        graft_files["trunk_q8"], graft_files["sidecar_fp8"], tmp_path / "g.gguf", free_bytes=free
    )
    assert seen == [tmp_path]
    assert message.startswith(f"not enough free space in {tmp_path}: the grafted file needs about")
    assert "(5000000 B) are free" in message


def test_an_unsupported_architecture_is_refused(
    graft_files: dict[str, Path], tmp_path: Path
) -> None:
    base = tmp_path / "llama.gguf"
    writer = GGUFWriter(base, "llama")
    writer.add_block_count(2)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    message = _refused(base, graft_files["sidecar_fp8"], tmp_path / "grafted.gguf")
    assert message.startswith("llama.gguf is a 'llama' model; grafting supports qwen35, qwen35moe")


def test_a_cancelled_graft_leaves_the_previous_output_untouched(
    graft_files: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "grafted.gguf"
    shutil.copyfile(graft_files["grafted_q4"], out)
    before = out.read_bytes()
    ctx = JobContext()

    def cancel_midway(event: JobEvent) -> None:
        if isinstance(event, ProgressEvent) and 0 < event.done < event.total:
            ctx.cancel.cancel()

    ctx.emit = cancel_midway
    with pytest.raises(JobCancelled):
        graft_mtp(graft_files["trunk_q8"], graft_files["sidecar_fp8"], out, ctx=ctx)
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grafted.gguf"]


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 4 MiB file system (tmpfs), smaller than any grafted demo file."""
    folder = tmp_path / "tiny-disk"
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(folder)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip("mounting a tmpfs needs root; the injected free-space test covers the check")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_a_real_small_disk_is_refused_by_the_free_space_check(
    graft_files: dict[str, Path], tiny_disk: Path
) -> None:
    message = _refused(graft_files["trunk_q8"], graft_files["sidecar_fp8"], tiny_disk / "g.gguf")
    assert message.startswith(f"not enough free space in {tiny_disk}")
    assert list(tiny_disk.iterdir()) == []


def test_a_disk_that_fills_up_while_writing_leaves_nothing_behind(
    graft_files: dict[str, Path], tiny_disk: Path
) -> None:
    """The free-space figure can be wrong (another program writes at the same time): the write
    itself then fails with the file system's error, and the partial file is removed."""
    message = _refused(
        graft_files["trunk_q8"],
        graft_files["sidecar_fp8"],
        tiny_disk / "g.gguf",
        free_bytes=lambda _folder: 1 << 40,
    )
    assert message.startswith(f"writing {tiny_disk / 'g.gguf'} failed (No space left on device)")
    assert list(tiny_disk.iterdir()) == []
