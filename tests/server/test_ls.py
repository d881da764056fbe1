"""``mtp-studio ls`` lists the models ``serve`` runs, as a user's library holds them: each id with
its format, size and MTP status (a drafter is its target's status, never a row), and ``--json``
says the same with the names a request may use."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.server.library import ALL_IDS, CACHED_ID, DENSE_ID, Library, lay_out_library


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    return lay_out_library(tmp_path_factory.mktemp("ls-library"))


def ls(library: Library, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **library.env, "MTP_STUDIO_HOME": str(library.home)}
    command = [sys.executable, "-m", "app", "ls", "--models-dir", str(library.models_dir), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.slow
def test_ls_prints_each_model_with_format_size_and_mtp(library: Library) -> None:
    result = ls(library)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["ID", "FORMAT", "SIZE", "MTP"]
    rows = {line.split()[0]: line for line in lines[1:-1]}
    assert set(rows) == ALL_IDS
    assert re.search(r"GGUF Q8_0\s+11\.2 MB\s+head \(1 block inside\)", rows[CACHED_ID])
    assert re.search(r"drafter \(.*MTP/gemma4-tiny-dense-assistant-Q8_0\.gguf\)", rows[DENSE_ID])
    assert lines[-1].startswith("7 models · ") and str(library.models_dir) in lines[-1]


def test_ls_json_has_the_names_a_request_may_use(library: Library) -> None:
    listed = json.loads(ls(library, "--json").stdout)
    models = {model["id"]: model for model in listed["models"]}
    assert set(models) == ALL_IDS
    cached = models[CACHED_ID]
    assert {"acme/Demo-GGUF", "Demo-GGUF:Q8_0", "Demo-Q8_0"} <= set(cached["names"])
    assert (cached["mtp"], cached["format"], cached["quantization"]) == ("head", "GGUF", "Q8_0")
    assert models[DENSE_ID]["mtp"] == "drafter" and models["demo-mtp"]["mtp"] == "head"
    assert models["vision/demo-vision-Q8_0.gguf"]["projector"].endswith(
        "mmproj-demo-vision-F16.gguf"
    )
