"""``mtp-studio chat`` and ``mtp-studio bench decode`` as a user runs them."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from app.cli import main
from app.engine.errors import RuntimeBackendError
from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.demo_model import DEMO_MODEL_FILENAME, demo_model_path
from app.engine.runtime.core.request import GenerationRequest
from app.engine.runtime.sampling.sampler import SamplerSettings
from app.engine.runtime.speculative.depth_policy import AUTO_MAX_DEPTH
from app.engine.runtime.speculative.generation import generate


def _chat(model: Path, *extra: str) -> list[str]:
    return ["chat", "--model", str(model), "--threads", "1", "--ctx", "1024", *extra]


def test_chat_json_prints_text_token_ids_and_statistics(
    tiny_models: dict[str, Path], backend: LlamaCppBackend, capsys: pytest.CaptureFixture
) -> None:
    args = _chat(tiny_models["mtp"], "--prompt", "Hello", "--temp", "0", "--max-tokens", "12")
    assert main([*args, "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["model"] == str(tiny_models["mtp"])
    # No depth flag: the default is the adaptive depth, which may draft up to 4 per cycle.
    assert answer["stats"]["mode"] == "lc" and answer["stats"]["depth"] == AUTO_MAX_DEPTH
    assert len(answer["stats"]["acceptance_by_depth"]) == AUTO_MAX_DEPTH
    expected = generate(
        backend,
        GenerationRequest(
            messages=(ChatMessage("user", "Hello"),),
            max_tokens=12,
            sampler=SamplerSettings(temperature=0.0),
        ),
        emit=lambda _c: None,
        cancelled=lambda: False,
    )
    assert answer["token_ids"] == list(expected.token_ids)
    assert answer["text"] == expected.text


def test_chat_streams_the_answer_and_reports_statistics(
    tiny_models: dict[str, Path], capsys: pytest.CaptureFixture
) -> None:
    args = _chat(tiny_models["mtp"], "--prompt", "Hi", "--max-tokens", "10", "--mtp-depth", "2")
    assert main([*args, "--seed", "7", "--accept", "match"]) == 0
    captured = capsys.readouterr()
    assert "tiny-mtp.gguf · qwen35 · llama.cpp · MTP head: 1 layer(s), depth 2, match" in (
        captured.err
    )
    assert "tokens (" in captured.err and "acceptance by depth" in captured.err
    assert captured.out.endswith("\n")


def test_chat_on_a_model_without_mtp_says_it_decodes_plainly(
    tiny_models: dict[str, Path], capsys: pytest.CaptureFixture
) -> None:
    assert main(_chat(tiny_models["no_mtp"], "--prompt", "Hi", "--max-tokens", "4")) == 0
    assert "note: tiny-no-mtp.gguf has no MTP block" in capsys.readouterr().err


@pytest.mark.slow
def test_chat_stops_unsure_drafts_and_keeps_the_plain_output(
    tiny_models: dict[str, Path], capsys: pytest.CaptureFixture
) -> None:
    common = ["--prompt", "The sea at night", "--max-tokens", "40", "--temp", "0", "--json"]
    assert main(_chat(tiny_models["mtp"], *common, "--mtp-depth", "0")) == 0
    plain = json.loads(capsys.readouterr().out)
    args = _chat(tiny_models["mtp"], *common, "--mtp-depth", "4", "--stop-unsure-drafts")
    assert main(args) == 0
    unsure = json.loads(capsys.readouterr().out)
    assert unsure["token_ids"] == plain["token_ids"]
    assert unsure["stats"]["confidence_stops"] > 0


def test_interactive_chat_keeps_the_conversation(
    tiny_models: dict[str, Path], capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A first message long enough that its prompt keeps a checkpoint before its last token: the
    # tiny model's reply tokenizes differently in the history, so turn 2 resumes there.
    first = "tell me about the sea and the tide " * 10
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{first}\nsecond\n/reset\nthird\n/exit\n"))
    args = _chat(tiny_models["mtp"], "--max-tokens", "3", "--json", "--temp", "0")
    assert main(args) == 0
    answers = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    prompt_lengths = [answer["prompt_tokens"] for answer in answers]
    assert len(answers) == 3
    assert prompt_lengths[1] > prompt_lengths[0] + 3  # the second turn carries the first
    assert prompt_lengths[2] < prompt_lengths[1]  # /reset forgot it
    # The second turn prefilled only what was new: the first turn's prompt was kept.
    reused = [answer["stats"]["prompt_reused_tokens"] for answer in answers]
    assert reused[0] == 0 and reused[1] >= prompt_lengths[0] - 1


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--model", "/nonexistent/model.gguf"], "model file not found: /nonexistent/model.gguf"),
        (["--backend", "mlx"], "the MLX backend runs model folders"),
        (["--mtp-depth", "9"], "MTP depth 9 is invalid"),
        (["--top-p", "0"], "top-p 0.0 is invalid"),
    ],
)
def test_chat_errors_are_one_clear_line_and_exit_2(
    tiny_models: dict[str, Path],
    capsys: pytest.CaptureFixture,
    extra: list[str],
    message: str,
) -> None:
    args = ["chat", "--model", str(tiny_models["mtp"]), "--prompt", "x", *extra]
    assert main(args) == 2
    error = capsys.readouterr().err
    assert error.startswith("mtp-studio: error: ") and message in error
    assert error.count("\n") == 1


def test_the_demo_model_is_found_or_clearly_missing(tmp_path: Path) -> None:
    with pytest.raises(RuntimeBackendError, match=r"demo-mtp\.gguf is missing; pass --model"):
        demo_model_path(tmp_path)
    (tmp_path / DEMO_MODEL_FILENAME).write_bytes(b"GGUF")
    assert demo_model_path(tmp_path) == tmp_path / DEMO_MODEL_FILENAME


@pytest.mark.slow
def test_bench_decode_compares_every_mode_in_one_run(
    tiny_models: dict[str, Path], capsys: pytest.CaptureFixture
) -> None:
    args = ["bench", "decode", "--model", str(tiny_models["mtp"]), "--depths", "1,2"]
    assert main([*args, "--max-tokens", "12", "--repeats", "1", "--threads", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    labels = [mode["label"] for mode in report["modes"]]
    assert labels == [
        "plain (AR)",
        "MTP LC K=1",
        "MTP match K=1",
        "MTP LC K=2",
        "MTP match K=2",
        "LC K=2, unsure stop",
        "MTP LC auto",
        "auto, unsure stop",
        "default (no flags)",
    ]
    default = report["modes"][-1]
    assert default["adaptive"] is True and default["depth"] == AUTO_MAX_DEPTH
    assert "default ≥ 0.98 × max(plain, best fixed depth)" in report["checks"]
    assert report["to_best"]["default"]["wall"] > 0 and report["to_best"]["default"]["clock"] > 0
    low, high = report["to_best"]["default"]["wall_interval_90"]
    assert 0 < low <= high
    assert report["llama_server"] == []
    assert report["greedy_identical"] == {
        "1": True,
        "2": True,
        "auto": True,
        "auto-unsure": True,
    }
    assert report["to_best"]["auto-unsure"]["wall"] > 0
    unsure = next(mode for mode in report["modes"] if mode["mode"] == "lc-unsure")
    assert unsure["confidence_stops"] > 0 and unsure["mean_draft_depth"] < 2
    assert report["checks"]["greedy MTP identical to plain decoding"] is True
    for mode in report["modes"]:
        assert mode["requests"] == 6 and mode["generated_tokens"] > 0
        assert mode["decode_tokens_per_second"] > 0 and mode["clock_tokens_per_second"] > 0
        if mode["depth"]:
            assert len(mode["acceptance_by_depth"]) == mode["depth"]
            assert 1.0 <= mode["tokens_per_cycle"] <= mode["depth"] + 1
            assert 0.0 <= mode["mean_draft_depth"] <= mode["depth"]
        if mode["mode"] in ("lc", "match"):
            assert mode["mean_draft_depth"] > 0  # short replies end with shallower cycles
            assert mode["cost_ratio"] > 0 and mode["expected_speedup"] > 0
            # The bench's explanation of a missed Leviathan ratio must be arithmetic, not prose.
            assert mode["speedup_to_expected"] == pytest.approx(
                mode["expected_ceiling"] * (1 - mode["loop_overhead"]), rel=1e-3
            )


@pytest.mark.slow
def test_bench_decode_prints_the_table_and_targets(
    tiny_models: dict[str, Path], capsys: pytest.CaptureFixture
) -> None:
    args = ["bench", "decode", "--model", str(tiny_models["mtp"]), "--depths", "1"]
    assert main([*args, "--max-tokens", "4", "--repeats", "1", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert "plain (AR)" in out and "MTP LC K=1" in out and "MTP match K=1" in out
    assert "targets (best depth K=1):" in out
    assert "greedy MTP identical to plain decoding" in out


@pytest.mark.slow
def test_bench_decode_penalties_runs_plain_and_mtp_with_them_side_by_side(
    tiny_models: dict[str, Path], capsys: pytest.CaptureFixture
) -> None:
    args = ["bench", "decode", "--model", str(tiny_models["mtp"]), "--depths", "1", "--penalties"]
    assert main([*args, "--max-tokens", "8", "--repeats", "1", "--threads", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    penalised = {mode["label"]: mode for mode in report["modes"] if "penalties" in mode["mode"]}
    assert set(penalised) == {"plain, penalties", "LC K=1, penalties"}
    assert all(mode["decode_tokens_per_second"] > 0 for mode in penalised.values())
    assert report["greedy_identical"]["1, penalties"] is True
    assert main([*args, "--max-tokens", "4", "--repeats", "1", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert "penalties on vs off (presence 0.5, frequency 0.5, repetition 1.1" in out
    assert re.search(r"MTP LC K=1 +[\d.]+ → +[\d.]+ tok/s", out)


@pytest.mark.slow
def test_bench_decode_wide_runs_the_table_on_the_widened_stand_in(
    tiny_models: dict[str, Path], capsys: pytest.CaptureFixture
) -> None:
    args = ["bench", "decode", "--model", str(tiny_models["mtp"]), "--depths", "1", "--wide", "3"]
    assert main([*args, "--max-tokens", "4", "--repeats", "1", "--threads", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert Path(report["model"]).name == "tiny-mtp-wide3.gguf"
    assert not Path(report["model"]).exists()  # the temporary folder is gone after the run
    assert report["greedy_identical"] == {"1": True, "auto": True, "auto-unsure": True}


def test_bench_decode_names_a_missing_llama_server(
    tiny_models: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    missing = tmp_path / "llama-server"
    args = [
        "bench",
        "decode",
        "--model",
        str(tiny_models["mtp"]),
        "--vs-llama-server",
        str(missing),
    ]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "packaging/build_llama_server.sh" in err


def test_bench_decode_needs_an_mtp_head(
    tiny_models: dict[str, Path], capsys: pytest.CaptureFixture
) -> None:
    assert main(["bench", "decode", "--model", str(tiny_models["no_mtp"])]) == 2
    assert "bench decode compares MTP with plain decoding" in capsys.readouterr().err
    assert main(["bench", "decode", "--model", str(tiny_models["mtp"]), "--depths", "0,x"]) == 2
    assert "--depths '0,x' is invalid" in capsys.readouterr().err
