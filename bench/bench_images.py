"""Images with MTP, side by side in one run: ``python bench/bench_images.py [--model GGUF]
[--mmproj FILE] [--depth 3] [--threads 2] [--repeats 3] [--vs-llama-server PATH] [--json]``.

The figures issue 36 asks for (docs/vision.md#figures), on the vision demo by default:

- **time to first token with one picture**, cold (a picture the model has not seen: encoded) and
  reused (a follow-up question about the same picture: kept with the prefix, not encoded again),
  beside the same question without a picture; as the worker measures it (from the request to the
  first token, the picture's preparation included) and as the client sees it;
- **decode tok/s and acceptance after a picture vs the same text without one**, plain decoding and
  MTP at ``--depth`` (greedy; MTP's output is checked to equal plain decoding's, picture or not);
- the same from **llama-server --mmproj** on the same files (plain, and ``--spec-type draft-mtp``
  at the same depth), its TTFT from the first streamed event and its ``prompt_ms``/``cache_n``.

Ours runs in the inference worker as the chat and ``serve`` run it. Figures taken on a shared
machine are noisy: they are measured side by side, in one run, with the same threads.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend  # noqa: E402
from app.engine.runtime.backends.llama_cpp.decode import Decoder  # noqa: E402
from app.engine.runtime.bench.llama_server import LlamaServer  # noqa: E402
from app.engine.runtime.chat_format.images import ImageLimits, ImagePart, read_image  # noqa: E402
from app.engine.runtime.chat_format.prompting import ChatMessage, PlacedImage  # noqa: E402
from app.engine.runtime.core.backend import LoadSettings  # noqa: E402
from app.engine.runtime.core.demo_model import (  # noqa: E402
    DEMO_VISION_MODEL,
    DEMO_VISION_PROJECTOR,
)
from app.engine.runtime.core.request import GenerationRequest, GenerationResult  # noqa: E402
from app.engine.runtime.core.stats import DecodeStats, combined_stats  # noqa: E402
from app.engine.runtime.process.client import RuntimeClient  # noqa: E402
from app.engine.runtime.sampling.sampler import SamplerSettings  # noqa: E402
from app.engine.runtime.speculative.generation import generate  # noqa: E402
from tests.vision.conftest import picture  # noqa: E402

GREEDY = SamplerSettings(temperature=0)
QUESTIONS = (
    "Return the sum of a list.",
    "Write a class for a stack.",
    "Parse a date from a string.",
)
FOLLOW_UP = "Now make it shorter."
PICTURE_SIZE = (320, 240)  # 10×8 = 80 image tokens on the demo's projector
CONTEXT = 4096


def shown(seed: int) -> ImagePart:
    data = picture(*PICTURE_SIZE, seed=seed)
    return read_image(data, ImageLimits(), f"picture {seed}")


def asking(question: str, image: ImagePart | None) -> ChatMessage:
    images = (PlacedImage(0, image),) if image is not None else ()
    return ChatMessage("user", question, images=images)


@dataclass(frozen=True)
class Timed:
    """One request: worker-measured TTFT, client-observed TTFT, images encoded, prompt cells."""

    ttft: float
    client_ttft: float
    encoded: int
    reused: int
    result: GenerationResult


def ours(client: RuntimeClient, messages, depth: int, max_tokens: int) -> Timed:
    request = GenerationRequest(
        messages=tuple(messages), max_tokens=max_tokens, sampler=GREEDY, mtp_depth=depth
    )
    started = time.perf_counter()
    stream = client.start(request)
    first = 0.0
    for _chunk in stream:
        if not first:
            first = time.perf_counter() - started
    result = stream.wait()
    stats = result.stats
    return Timed(
        stats.ttft_seconds,
        first,
        stats.prompt_images_encoded,
        stats.prompt_reused_tokens,
        result,
    )


def our_ttft(client: RuntimeClient, depth: int, repeats: int) -> dict[str, list[Timed]]:
    """Cold (a new picture each time), reused (a follow-up about it), and without a picture."""
    runs: dict[str, list[Timed]] = {"cold": [], "reused": [], "no picture": []}
    for repeat in range(repeats):
        image = shown(100 + repeat)
        question = QUESTIONS[repeat % len(QUESTIONS)]
        cold = ours(client, [asking(question, image)], depth, 24)
        runs["cold"].append(cold)
        history = [
            asking(question, image),
            ChatMessage("assistant", cold.result.text),
            ChatMessage("user", FOLLOW_UP),
        ]
        runs["reused"].append(ours(client, history, depth, 8))
        runs["no picture"].append(ours(client, [asking(f"{question} ({repeat})", None)], depth, 8))
    return runs


def our_decode(client: RuntimeClient, depth: int, max_tokens: int) -> dict[str, DecodeStats]:
    """Plain and MTP after a picture and without one; MTP's tokens must equal plain's."""
    pooled: dict[str, list[DecodeStats]] = {}
    for index, question in enumerate(QUESTIONS):
        for label, image in (("picture", shown(200 + index)), ("no picture", None)):
            plain = ours(client, [asking(question, image)], 0, max_tokens).result
            drafted = ours(client, [asking(question, image)], depth, max_tokens).result
            if drafted.token_ids != plain.token_ids:
                raise SystemExit(f"MTP's output differs from plain decoding ({label}): a bug")
            pooled.setdefault(f"plain, {label}", []).append(plain.stats)
            pooled.setdefault(f"MTP K={depth}, {label}", []).append(drafted.stats)
    return {label: combined_stats(stats) for label, stats in pooled.items()}


def theirs(binary: Path, args: argparse.Namespace, answers: list[str]) -> dict[str, object]:
    """llama-server --mmproj: TTFT cold/reused/no picture (MTP), decode after a picture or not.
    The follow-ups carry ``answers`` (ours: greedy, the same model, so the same words)."""
    servers = {
        depth: LlamaServer(
            binary,
            args.model,
            depth=depth,
            threads=args.threads,
            context=CONTEXT,
            projector=args.mmproj,
        )
        for depth in (0, args.depth)
    }
    try:
        for server in servers.values():
            server.wait_ready()
        mtp = servers[args.depth]
        ttft: dict[str, list[float]] = {"cold": [], "reused": [], "no picture": []}
        cached: list[int] = []
        for repeat in range(args.repeats):
            image = shown(100 + repeat)
            question = QUESTIONS[repeat % len(QUESTIONS)]
            cold = mtp.prompt_timings([asking(question, image)], GREEDY, 24)
            ttft["cold"].append(cold.first_token_seconds)
            history = [
                asking(question, image),
                ChatMessage("assistant", answers[repeat]),
                ChatMessage("user", FOLLOW_UP),
            ]
            again = mtp.prompt_timings(history, GREEDY, 8)
            ttft["reused"].append(again.first_token_seconds)
            cached.append(again.cached_tokens)
            alone = mtp.prompt_timings([asking(f"{question} ({repeat})", None)], GREEDY, 8)
            ttft["no picture"].append(alone.first_token_seconds)
        decode = {}
        for label, seed in (("picture", 200), ("no picture", None)):
            for depth, server in servers.items():
                replies = [
                    server.reply(
                        [asking(question, shown(seed + index) if seed is not None else None)],
                        GREEDY,
                        args.max_tokens,
                    )
                    for index, question in enumerate(QUESTIONS)
                ]
                tokens = sum(r.tokens for r in replies)
                seconds = sum(r.decode_seconds for r in replies)
                drafted = sum(r.drafted for r in replies)
                accepted = sum(r.accepted for r in replies)
                name = "plain" if depth == 0 else f"MTP K={depth}"
                decode[f"{name}, {label}"] = {
                    "tok_s": tokens / seconds if seconds else 0.0,
                    "acceptance": accepted / drafted if drafted else None,
                    "tokens": tokens,
                }
        return {"ttft": ttft, "reused_cache_n": cached, "decode": decode}
    finally:
        for server in servers.values():
            server.close()


def hand_off_acceptance(args: argparse.Namespace) -> dict[str, DecodeStats]:
    """Acceptance after a picture with the MTP head's first row after it paired with the
    picture's last hidden row (ours) and with the row before the picture (what llama-server's
    drafter keeps), the same runtime otherwise, in this process; output identical both ways."""
    settings = LoadSettings(
        threads=args.threads, context_length=CONTEXT, projector=args.mmproj, max_draft_depth=4
    )
    backend = LlamaCppBackend(args.model, settings)
    pooled: dict[str, list[DecodeStats]] = {"last picture row (ours)": [], "row before (stale)": []}
    outputs: dict[str, list[tuple[int, ...]]] = {label: [] for label in pooled}
    try:
        for label in pooled:
            with stale_hand_off(label.startswith("row before")):
                for index, question in enumerate(QUESTIONS * 2):
                    backend.reset()
                    request = GenerationRequest(
                        messages=(asking(question, shown(300 + index)),),
                        max_tokens=args.max_tokens,
                        sampler=GREEDY,
                        mtp_depth=args.depth,
                    )
                    result = generate(
                        backend, request, emit=lambda _c: None, cancelled=lambda: False
                    )
                    pooled[label].append(result.stats)
                    outputs[label].append(result.token_ids)
    finally:
        backend.close()
    if len({tuple(tokens) for tokens in outputs.values()}) != 1:
        raise SystemExit("the hand-off changed the output: a bug (drafts are verified)")
    return {label: combined_stats(stats) for label, stats in pooled.items()}


@contextlib.contextmanager
def stale_hand_off(stale: bool) -> Iterator[None]:
    """With ``stale``, the decoder hands the drafter the hidden row of the last text token before
    a picture instead of the picture's last row (measurement only)."""
    if not stale:
        yield
        return
    run_image, prompt_rows = Decoder._run_image, Decoder._prompt_rows

    def remember(self, lane, chunk, position, previous):
        self._bench_before = prompt_rows(self, lane, chunk, position, previous)
        return self._bench_before

    def before_picture(self, lane, run, position, with_mtp):
        run_image(self, lane, run, position, with_mtp)
        return self._bench_before

    Decoder._run_image, Decoder._prompt_rows = before_picture, remember
    try:
        yield
    finally:
        Decoder._run_image, Decoder._prompt_rows = run_image, prompt_rows


def median_ms(values) -> str:
    return f"{statistics.median(values) * 1000:7.1f} ms" if values else "      —"


def pooled_acceptance(stats: DecodeStats) -> float | None:
    drafted = sum(stats.drafted_by_depth)
    return sum(stats.accepted_by_depth) / drafted if drafted else None


def percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def report_hand_off(hand_off: dict[str, DecodeStats], args: argparse.Namespace) -> None:
    print(f"\nThe head's row after a picture (in-process, MTP K={args.depth}, 6 prompts)")
    for label, stats in hand_off.items():
        by_depth = " / ".join(percent(a) for a in stats.acceptance_by_depth)
        print(
            f"  {label:26} acceptance {by_depth}, pooled "
            f"{percent(pooled_acceptance(stats))}, {stats.tokens_per_cycle:.2f} tokens/cycle"
        )
    print("  (output identical both ways: every draft is verified)")


def report(our_times, our_stats, their_figures, args) -> None:
    print(f"model {args.model.name} + {args.mmproj.name} · {args.threads} threads · greedy")
    print(f"picture {PICTURE_SIZE[0]}×{PICTURE_SIZE[1]} PNG · MTP depth {args.depth}")
    print("\nTime to first token (median of", args.repeats, "· MTP on)")
    print(f"  {'':12} {'ours (worker)':>14} {'ours (client)':>14} {'llama-server':>14}")
    for label, runs in our_times.items():
        theirs_ms = median_ms(their_figures["ttft"][label]) if their_figures else "      —"
        print(
            f"  {label:12} {median_ms([r.ttft for r in runs]):>14} "
            f"{median_ms([r.client_ttft for r in runs]):>14} {theirs_ms:>14}"
        )
    encoded = [r.encoded for r in our_times["reused"]]
    reused = [r.reused for r in our_times["reused"]]
    line = f"  reused: ours encoded {encoded} pictures, kept {reused} prompt cells"
    if their_figures:
        line += f"; llama-server cache_n {their_figures['reused_cache_n']}"
    print(line)
    cold = statistics.median(r.ttft for r in our_times["cold"])
    again = statistics.median(r.ttft for r in our_times["reused"])
    print(f"  cold / reused (ours): {cold / again:.1f}×")
    print(f"\nDecode after a picture vs the same text without one ({args.max_tokens} tokens × 3)")
    print(f"  {'':24} {'ours tok/s':>10} {'acceptance':>22} {'llama-server':>12} {'acc.':>5}")
    for label, stats in our_stats.items():
        by_depth = " / ".join(percent(a) for a in stats.acceptance_by_depth) or "—"
        row = f"  {label:24} {stats.decode_tokens_per_second:10.0f} {by_depth:>22}"
        if their_figures and label in their_figures["decode"]:
            figures = their_figures["decode"][label]
            row += f" {figures['tok_s']:12.0f} {percent(figures['acceptance']):>5}"
        print(row)
    print("  (ours: acceptance by depth; llama-server: drafted tokens kept, all depths pooled)")
    for label in ("picture", "no picture"):
        stats = our_stats[f"MTP K={args.depth}, {label}"]
        plain = our_stats[f"plain, {label}"]
        speedup = stats.decode_tokens_per_second / plain.decode_tokens_per_second
        print(
            f"  ours, {label}: pooled acceptance {percent(pooled_acceptance(stats))}, "
            f"{stats.tokens_per_cycle:.2f} tokens/cycle, MTP/plain {speedup:.2f}×"
        )


def llama_server_binary(given: Path | None) -> Path | None:
    if given is not None:
        return given
    build = subprocess.run(
        ["bash", str(ROOT / "packaging" / "build_llama_server.sh")],
        capture_output=True,
        text=True,
    )
    return Path(build.stdout.strip().splitlines()[-1]) if build.returncode == 0 else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=DEMO_VISION_MODEL)
    parser.add_argument("--mmproj", type=Path, default=DEMO_VISION_PROJECTOR)
    parser.add_argument("--depth", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--vs-llama-server", type=Path, metavar="PATH")
    parser.add_argument("--no-llama-server", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    settings = LoadSettings(
        threads=args.threads,
        context_length=CONTEXT,
        projector=args.mmproj,
        max_draft_depth=max(args.depth, 1),
    )
    with RuntimeClient(args.model, settings=settings) as client:
        client.load()
        ours(client, [asking(QUESTIONS[0], shown(1))], args.depth, 4)  # warm-up
        our_times = our_ttft(client, args.depth, args.repeats)
        our_stats = our_decode(client, args.depth, args.max_tokens)
    hand_off = hand_off_acceptance(args)
    their_figures = None
    if not args.no_llama_server:
        binary = llama_server_binary(args.vs_llama_server)
        if binary is None:
            print("llama-server could not be built: its columns are left out", file=sys.stderr)
        else:
            answers = [run.result.text for run in our_times["cold"]]
            their_figures = theirs(binary, args, answers)
    if args.json:
        print(
            json.dumps(
                {
                    "ttft": {k: [r.ttft for r in v] for k, v in our_times.items()},
                    "decode": {k: v.to_dict() for k, v in our_stats.items()},
                    "llama_server": their_figures,
                    "hand_off": {k: v.to_dict() for k, v in hand_off.items()},
                },
                indent=1,
            )
        )
    else:
        report(our_times, our_stats, their_figures, args)
        report_hand_off(hand_off, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
