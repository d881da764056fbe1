"""A drafter is known by its architecture, found for its target, and refused when it does not fit.

On the shipped tiny Gemma 4 pairs (real GGUFs from llama.cpp's converter, real transformers
folders): which file is a drafter whatever its name, where a target finds its drafter (beside it,
in ``MTP/``, in a cache under the ``<base>-assistant`` name), and the one-line reasons a drafter
of another size, vocabulary or attention shape — or for another architecture — is refused with,
before anything is loaded.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.engine.chat.model_files import describe_model
from app.engine.drafter.facts import read_facts
from app.engine.drafter.pairing import check_pair, find_drafter
from app.engine.errors import DrafterError
from app.engine.runtime.core.demo_model import demo_model_path
from tests.drafter.pairs import PAIRS, Pair, rewrite_gguf

CENTROID, DENSE = PAIRS["centroid"], PAIRS["dense"]


@pytest.mark.parametrize("pair", PAIRS.values(), ids=PAIRS)
def test_the_drafter_is_known_by_its_architecture(pair: Pair) -> None:
    drafter, target = read_facts(pair.drafter), read_facts(pair.target)
    assert (drafter.drafter, drafter.architecture) == (True, "gemma4-assistant")
    assert (target.drafter, target.architecture) == (False, "gemma4")
    assert drafter.width == target.width == 128  # backbone_hidden_size = the target's width
    assert read_facts(pair.hf_drafter).drafter and not read_facts(pair.hf_target).drafter


def test_a_name_never_makes_or_unmakes_a_drafter(tmp_path: Path) -> None:
    renamed_drafter = shutil.copy(CENTROID.drafter, tmp_path / "gemma4-tiny-Q4_K_M.gguf")
    renamed_target = shutil.copy(CENTROID.target, tmp_path / "mtp-gemma4-tiny-assistant.gguf")
    assert read_facts(Path(renamed_drafter)).drafter
    assert not read_facts(Path(renamed_target)).drafter
    assert describe_model(Path(renamed_drafter)).is_drafter
    assert not describe_model(Path(renamed_target)).is_drafter


@pytest.mark.parametrize("pair", PAIRS.values(), ids=PAIRS)
def test_a_target_finds_its_drafter_beside_it_or_in_mtp(pair: Pair) -> None:
    found = find_drafter(pair.target)
    assert (found.path, found.passed_over) == (pair.drafter, ())
    assert find_drafter(pair.hf_target).path == pair.hf_drafter
    assert find_drafter(pair.drafter).path is None  # a drafter takes no drafter
    assert find_drafter(demo_model_path()).path is None  # nor does a model of another family


def test_a_drafter_is_found_in_a_cache_under_its_base_assistant_name(tmp_path: Path) -> None:
    cache = tmp_path / "hub"
    trunk = cache / "models--unsloth--gemma-4-Tiny-it-GGUF" / "snapshots" / "a1"
    drafter = cache / "models--someone--gemma-4-Tiny-it-assistant-GGUF" / "snapshots" / "b2"
    trunk.mkdir(parents=True)
    drafter.mkdir(parents=True)
    target = Path(shutil.copy(DENSE.target, trunk / "gemma-4-Tiny-it-Q8_0.gguf"))
    assistant = Path(shutil.copy(DENSE.drafter, drafter / "model-Q8_0.gguf"))
    assert find_drafter(target).path is None  # nothing beside it
    assert find_drafter(target, [cache], "unsloth/gemma-4-Tiny-it-GGUF").path == assistant
    catalog = find_drafter(target, [cache], None, "someone/gemma-4-Tiny-it-assistant-GGUF")
    assert catalog.path == assistant


def test_a_drafter_of_another_size_is_refused_with_one_line(tmp_path: Path) -> None:
    bigger = rewrite_gguf(
        DENSE.drafter, tmp_path / "wide.gguf", {"gemma4-assistant.embedding_length_out": 256}
    )
    with pytest.raises(DrafterError) as refused:
        check_pair(DENSE.target, bigger)
    message = str(refused.value)
    assert message == (
        "wide.gguf was made for a target of hidden size 256 but gemma4-tiny-dense-Q8_0.gguf has "
        "128; use the drafter made for this model size"
    )


def test_a_drafter_beside_a_target_it_does_not_fit_is_passed_over_with_the_reason(
    tmp_path: Path,
) -> None:
    target = Path(shutil.copy(DENSE.target, tmp_path / "gemma4-tiny-dense-Q8_0.gguf"))
    rewrite_gguf(
        DENSE.drafter, tmp_path / "mtp-other.gguf", {"gemma4-assistant.attention.key_length": 128}
    )
    found = find_drafter(target)
    assert found.path is None
    assert found.note == (
        "mtp-other.gguf reads full-attention keys of 1×128 (KV heads × head size) but "
        "gemma4-tiny-dense-Q8_0.gguf has 1×64; use the drafter made for this model"
    )


def test_a_drafter_of_another_vocabulary_is_refused(tmp_path: Path) -> None:
    folder = Path(shutil.copytree(CENTROID.hf_drafter, tmp_path / "assistant"))
    config = json.loads((folder / "config.json").read_text())
    config["text_config"]["vocab_size"] = 2048
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(DrafterError, match=r"vocabulary of 2048 tokens but target has 1024"):
        check_pair(CENTROID.hf_target, folder)


def test_a_gemma_drafter_is_refused_for_another_architecture() -> None:
    with pytest.raises(DrafterError) as refused:
        check_pair(demo_model_path(), CENTROID.drafter)
    assert str(refused.value) == (
        "mtp-gemma4-tiny-centroid-Q8_0.gguf is a gemma4-assistant drafter, which drafts for "
        "gemma4 models, but demo-mtp.gguf is qwen35"
    )


def test_a_drafter_cannot_be_chosen_to_chat_on_its_own() -> None:
    description = describe_model(CENTROID.drafter)
    assert not description.runnable
    assert description.runnable_reason is not None
    assert "is a drafter (gemma4-assistant)" in description.runnable_reason
