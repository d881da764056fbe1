"""The local hub's model listing answers ``list_models`` as the Hub does, for the real client.

Search, filters (tags such as ``gguf`` and ``base_model:quantized:ORG/NAME``), author, sorting,
limits and pages, the ``full`` and ``expand`` shapes, and file sizes through
``model_info(files_metadata=True)`` and ``list_repo_tree``.
"""

from __future__ import annotations

import httpx2
import pytest
from huggingface_hub import HfApi
from huggingface_hub.hf_api import RepoFile

from tests.localhub import LocalHub
from tests.localhub import listing_routes as listing
from tests.localhub.shaped_repos import (
    BASE,
    GGUF_REPO,
    HEAD_INSIDE_REPO,
    MLX_REPO,
    OTHER_REPO,
    SEPARATE_HEAD_REPO,
    SIZES,
    seed_shaped_repos,
)


@pytest.fixture
def api(local_hub: LocalHub) -> HfApi:
    seed_shaped_repos(local_hub)
    return HfApi(endpoint=local_hub.endpoint)


def ids(models) -> list[str]:
    return [model.id for model in models]


def test_search_is_a_case_insensitive_part_of_the_id(api: HfApi) -> None:
    found = ids(api.list_models(search="tiny-mtp-8b", sort="downloads"))
    assert found == [BASE, GGUF_REPO, MLX_REPO, HEAD_INSIDE_REPO, SEPARATE_HEAD_REPO]


def test_filters_are_tags_and_all_must_match(api: HfApi) -> None:
    gguf = set(ids(api.list_models(filter="gguf")))
    assert gguf == {GGUF_REPO, HEAD_INSIDE_REPO, SEPARATE_HEAD_REPO, OTHER_REPO}
    assert ids(api.list_models(filter="mlx")) == [MLX_REPO]
    conversions = set(ids(api.list_models(filter=f"base_model:quantized:{BASE}")))
    assert conversions == {GGUF_REPO, HEAD_INSIDE_REPO, SEPARATE_HEAD_REPO, MLX_REPO}
    both = ids(api.list_models(filter=["gguf", "mtp"]))
    assert both == [HEAD_INSIDE_REPO]


def test_author_and_sort_order(api: HfApi) -> None:
    assert ids(api.list_models(author="quantfolk", sort="downloads")) == [GGUF_REPO, OTHER_REPO]
    newest_first = ids(api.list_models(sort="created_at", limit=2))
    assert newest_first == [OTHER_REPO, MLX_REPO]


def test_limit_and_the_next_page_link(api: HfApi, local_hub: LocalHub) -> None:
    assert len(list(api.list_models(limit=3))) == 3
    first = httpx2.get(f"{local_hub.endpoint}/api/models", params={"limit": 2, "sort": "likes"})
    assert 'rel="next"' not in first.headers.get("Link", "")
    # a page of the Hub's size is followed by a link to the next one
    saved, listing.PAGE_SIZE = listing.PAGE_SIZE, 2
    try:
        assert len(list(api.list_models())) == 6
    finally:
        listing.PAGE_SIZE = saved


def test_short_full_and_expand_shapes(api: HfApi) -> None:
    [short] = api.list_models(search=MLX_REPO)
    assert short.siblings is None and short.library_name == "mlx" and short.downloads == 400
    [full] = api.list_models(search=MLX_REPO, full=True)
    assert sorted(s.rfilename for s in full.siblings) == [
        ".gitattributes",
        "README.md",
        "config.json",
        "model.safetensors",
    ]
    assert full.sha and full.last_modified is not None
    [expanded] = api.list_models(search=GGUF_REPO, expand=["siblings", "tags"])
    assert expanded.downloads is None
    assert "base_model:quantized:acme/Tiny-MTP-8B" in expanded.tags
    assert len(expanded.siblings) == len(SIZES) + 2


def test_bad_parameters_are_refused_with_the_reason(local_hub: LocalHub) -> None:
    reply = httpx2.get(f"{local_hub.endpoint}/api/models", params={"sort": "size"})
    assert reply.status_code == 400 and "Invalid sort parameter" in reply.json()["error"]


def test_file_sizes_through_model_info_and_the_tree(api: HfApi) -> None:
    info = api.model_info(GGUF_REPO, files_metadata=True)
    sizes = {s.rfilename: s.size for s in info.siblings if s.rfilename.endswith(".gguf")}
    assert sizes == SIZES
    assert "gguf" in info.tags and f"base_model:{BASE}" in info.tags
    tree = [f for f in api.list_repo_tree(GGUF_REPO, recursive=True) if isinstance(f, RepoFile)]
    assert {f.path: f.size for f in tree if f.path.endswith(".gguf")} == SIZES


def test_private_repos_are_listed_for_their_owner_only(local_hub: LocalHub) -> None:
    local_hub.store.commit_files("mtp-tester/secret-GGUF", {"a.gguf": b"GGUF"}, private=True)
    anonymous = HfApi(endpoint=local_hub.endpoint, token=False)
    assert ids(anonymous.list_models(search="secret")) == []
    assert ids(HfApi(endpoint=local_hub.endpoint).list_models(search="secret")) == [
        "mtp-tester/secret-GGUF"
    ]
