"""Downloading one quantisation of a real-shaped GGUF repo fetches exactly its files.

The local hub counts the bytes it serves per file, so "nothing else" is the server's word: the
chosen quantisation (every part of a split one) plus a separate ``mtp-*.gguf`` head file and one
vision projector (the smallest lossless, or the one asked for, or none), and not one byte of the
other quantisations, the other projectors or the card. Also the file-name rules behind it
(:mod:`app.engine.download.quantisation`) on names real repos use.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.engine.download import DownloadJob, DownloadRequest
from app.engine.download.quantisation import choose_projector, gguf_files, quant_label
from app.engine.errors import DownloadError
from app.engine.jobs import JobContext
from tests.localhub import LocalHub
from tests.localhub.shaped_repos import (
    GGUF_REPO,
    PROJECTOR,
    SEPARATE_HEAD_REPO,
    SIZES,
    SPLIT_BF16_BYTES,
    seed_shaped_repos,
)
from tests.store.isolation import IsolatedHome

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("Qwen3.6-27B-UD-Q4_K_XL.gguf", "UD-Q4_K_XL"),
        ("Qwen3-8B-IQ4_XS.gguf", "IQ4_XS"),
        ("model-q8_0.gguf", "Q8_0"),
        ("gpt-oss-20b-MXFP4.gguf", "MXFP4"),
        ("Tiny-Q4_K_M-mtp.gguf", "Q4_K_M-mtp"),
        ("Q4_0/m-Q4_0-00001-of-00002.gguf", "Q4_0"),
        ("Llama-3-8B.gguf", "Llama-3-8B"),
    ],
)
def test_quantisation_labels_from_real_file_names(name: str, label: str) -> None:
    assert quant_label(name) == label


def test_a_split_file_is_one_quantisation_and_a_projector_none() -> None:
    files = gguf_files(SIZES)
    assert [q.label for q in files.quantisations] == ["Q4_K_M", "Q8_0", "BF16"]
    bf16 = files.find("bf16")
    assert bf16.split and bf16.size == SPLIT_BF16_BYTES
    assert bf16.first_file == "BF16/Tiny-MTP-8B-BF16-00001-of-00003.gguf"
    assert len(files.projectors) == 3
    with pytest.raises(DownloadError, match="has no quantisation 'Q2_K'; it has Q4_K_M, Q8_0"):
        files.find("Q2_K", "some/repo")


@pytest.mark.parametrize(
    ("sizes", "asked", "chosen"),
    [
        # the smallest lossless; at equal size F16 (every llama.cpp backend runs it) over BF16
        (
            {"mmproj-BF16.gguf": 9, "mmproj-F16.gguf": 9, "mmproj-F32.gguf": 18},
            "",
            "mmproj-F16.gguf",
        ),
        (
            {"mmproj-F32.gguf": 18, "mmproj-model-bf16.gguf": 9, "mmproj-Q8_0.gguf": 5},
            "",
            "mmproj-model-bf16.gguf",
        ),
        # no lossless one: the least lossy (the largest)
        ({"mmproj-Q4_0.gguf": 3, "mmproj-Q8_0.gguf": 5}, "", "mmproj-Q8_0.gguf"),
        ({"mmproj-F16.gguf": 9, "mmproj-Q8_0.gguf": 5}, "q8_0", "mmproj-Q8_0.gguf"),
        ({"vision/mmproj-F16.gguf": 9}, "mmproj-f16.gguf", "vision/mmproj-F16.gguf"),
        ({"mmproj-F16.gguf": 9}, "none", None),
        ({}, "", None),
    ],
)
def test_the_projector_fetched_is_the_smallest_lossless_unless_asked(
    sizes: dict[str, int], asked: str, chosen: str | None
) -> None:
    assert choose_projector(sizes, asked) == chosen


def test_asking_for_a_projector_the_repo_lacks_names_those_it_has() -> None:
    with pytest.raises(DownloadError) as caught:
        choose_projector({"mmproj-F16.gguf": 9, "mmproj-Q8_0.gguf": 5}, "Q4_0", "some/repo")
    assert str(caught.value) == (
        "some/repo has no projector 'Q4_0'; it has mmproj-F16.gguf, mmproj-Q8_0.gguf"
    )


def download(hub: LocalHub, home: IsolatedHome, repo: str, quant: str, projector: str = ""):
    request = DownloadRequest(
        repo, str(home.hub_cache), hub.endpoint, quant=quant, projector=projector
    )
    return DownloadJob(request)(JobContext(emit=lambda _event: None))


def test_a_split_quantisation_fetches_its_parts_its_projector_and_nothing_else(
    local_hub: LocalHub, home: IsolatedHome
) -> None:
    seed_shaped_repos(local_hub)
    local_hub.traffic.reset()
    result = download(local_hub, home, GGUF_REPO, "BF16")
    parts = tuple(path for path in SIZES if path.startswith("BF16/"))
    assert result.files == (*parts, PROJECTOR)
    for name in result.files:
        assert (result.location / name).stat().st_size == SIZES[name]
    served = local_hub.traffic.bytes_served_per_file()
    assert {path for (_, path) in served} == {*parts, PROJECTOR}
    ratio = local_hub.traffic.bytes_served(GGUF_REPO) / (SPLIT_BF16_BYTES + SIZES[PROJECTOR])
    assert ratio == 1.0


@pytest.mark.parametrize(
    ("projector", "fetched"),
    [("Q8_0", "mmproj-Tiny-MTP-8B-Q8_0.gguf"), ("none", None)],
)
def test_another_projector_or_none_is_fetched_when_asked(
    local_hub: LocalHub, home: IsolatedHome, projector: str, fetched: str | None
) -> None:
    seed_shaped_repos(local_hub)
    local_hub.traffic.reset()
    result = download(local_hub, home, GGUF_REPO, "Q4_K_M", projector)
    expected = ("Tiny-MTP-8B-Q4_K_M.gguf", *((fetched,) if fetched else ()))
    assert result.files == expected
    assert {path for (_, path) in local_hub.traffic.bytes_served_per_file()} == set(expected)


def test_a_trunk_comes_with_its_separate_head_file(local_hub: LocalHub, home: IsolatedHome) -> None:
    seed_shaped_repos(local_hub)
    local_hub.traffic.reset()
    result = download(local_hub, home, SEPARATE_HEAD_REPO, "Q8_0")
    assert result.files == ("Tiny-MTP-8B-Q8_0.gguf", "mtp-Tiny-MTP-8B-Q8_0.gguf")
    assert set(local_hub.traffic.bytes_served_per_file()) == {
        (SEPARATE_HEAD_REPO, name) for name in result.files
    }


@pytest.mark.slow
def test_the_command_takes_quant_and_names_the_ones_there_are(
    local_hub: LocalHub, home: IsolatedHome
) -> None:
    seed_shaped_repos(local_hub)
    env = {
        **os.environ,
        "MTP_STUDIO_HOME": str(home.root / "mtp-studio"),
        "HF_HUB_CACHE": str(home.hub_cache),
        "PYTHONPATH": str(ROOT),
    }
    ok = subprocess.run(
        [
            sys.executable,
            "-m",
            "app",
            "download",
            GGUF_REPO,
            "--quant",
            "Q8_0",
            "--projector",
            "bf16",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    assert (Path(ok.stdout.strip()) / "Tiny-MTP-8B-Q8_0.gguf").stat().st_size == 500_000
    assert (Path(ok.stdout.strip()) / "mmproj-Tiny-MTP-8B-bf16.gguf").stat().st_size == 60_000
    missing = subprocess.run(
        [sys.executable, "-m", "app", "download", GGUF_REPO, "--quant", "Q2_K"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines()[-1] == (
        f"mtp-studio: error: {GGUF_REPO} has no quantisation 'Q2_K'; it has Q4_K_M, Q8_0, BF16"
    )
