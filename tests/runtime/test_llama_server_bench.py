"""llama.cpp's own MTP loop as the benchmark drives it: real llama-server, real timings."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.bench.llama_server import LlamaServerPool, parse_timings
from app.engine.runtime.core.demo_model import demo_model_path
from app.engine.runtime.sampling.sampler import SamplerSettings


@pytest.mark.slow
def test_plain_and_draft_mtp_servers_report_their_timings(llama_server_binary: Path) -> None:
    pool = LlamaServerPool(llama_server_binary, demo_model_path(), depths=[2], threads=1)
    try:
        greedy = SamplerSettings(temperature=0.0, seed=1)
        for _ in range(2):
            pool.run("Return the number of lines in a text file.", greedy, 48)
        plain, drafting, unsure = pool.figures()
    finally:
        pool.close()
    assert (plain.label, drafting.label, unsure.label) == (
        "llama-server plain",
        "llama-server MTP K=2",
        "llama-server MTP K=2, p-min 0.75",
    )
    for figures in (plain, drafting, unsure):
        assert figures.requests == 2 and figures.generated_tokens > 0
        assert figures.decode_tokens_per_second > 0
    assert plain.drafted == 0
    # The demo head's drafts are right most of the time on this prompt.
    assert 0 < drafting.accepted <= drafting.drafted
    assert drafting.acceptance > 0.3
    # With p-min its draft stops at unsure tokens: fewer drafts, kept more often.
    assert unsure.p_min == 0.75 and 0 < unsure.drafted < drafting.drafted


def test_a_reply_without_timings_is_a_clear_error() -> None:
    with pytest.raises(RuntimeBackendError, match="no 'timings' object"):
        parse_timings({"choices": []})
    with pytest.raises(RuntimeBackendError, match="'predicted_ms'"):
        parse_timings({"timings": {"predicted_n": 3}})


def test_a_missing_binary_names_the_path_and_the_build_script(tmp_path: Path) -> None:
    missing = tmp_path / "llama-server"
    with pytest.raises(RuntimeBackendError, match=r"build_llama_server\.sh") as error:
        LlamaServerPool(missing, demo_model_path(), depths=[1], threads=1)
    assert str(missing) in str(error.value)
