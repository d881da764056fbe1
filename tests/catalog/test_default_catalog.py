"""The catalog shipped with the app is clean and covers every MTP family the app supports."""

from __future__ import annotations

from collections import defaultdict

from app.engine.catalog import Catalog, default_catalog_path, load_catalog, quant_marker


def test_default_catalog_has_no_errors_and_no_warnings() -> None:
    assert [str(p) for p in Catalog.open().problems()] == []


def test_default_catalog_covers_the_mtp_families_from_their_canonical_repos() -> None:
    bases = {entry.base_model for entry in load_catalog().entries()}
    assert {
        "Qwen/Qwen3.6-27B",
        "Qwen/Qwen3-Next-80B-A3B-Instruct",
        "deepseek-ai/DeepSeek-V3",
        "deepseek-ai/DeepSeek-V3-0324",
        "deepseek-ai/DeepSeek-R1",
        "zai-org/GLM-4.5",
        "zai-org/GLM-4.5-Air",
        "XiaomiMiMo/MiMo-7B-RL",
    } <= bases
    assert any(base.startswith("Qwen/Qwen3.5-") for base in bases)


def test_every_base_model_has_several_quants_sharing_one_unsuffixed_sidecar() -> None:
    """Models with MTP heads of their own; models that draft with a separate drafter model
    (Gemma 4) name it instead (tests/catalog/test_drafter_repo.py)."""
    sidecars: dict[str, set[str]] = defaultdict(set)
    quants: dict[str, set[str]] = defaultdict(set)
    for entry in load_catalog().entries():
        if entry.drafter_repo:
            continue
        assert entry.has_sidecar, entry.key
        sidecars[entry.base_model].add(entry.mtp_sidecar_repo or "")
        quants[entry.base_model].add(entry.quant)
    for base, repos in sidecars.items():
        [sidecar] = repos
        assert sidecar.startswith("mtp-studio/") and sidecar.endswith("-mtp"), sidecar
        assert quant_marker(sidecar) is None
        assert len(quants[base]) >= 2, base


def test_default_catalog_is_found_relative_to_the_package() -> None:
    path = default_catalog_path()
    assert path.parts[-3:] == ("resources", "catalog", "default.yaml")
    assert path.is_file()
