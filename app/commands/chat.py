"""``mtp-studio chat``: talk to a model with native MTP speculative decoding.

``--prompt TEXT`` answers one message (streamed to stdout, statistics on stderr, or one JSON
object with ``--json``); without it the command is an interactive chat that keeps the
conversation (``/reset`` forgets it, ``/exit`` or end of input quits, Ctrl-C stops the current
answer). With no ``--model`` it uses the bundled demo model.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from app.engine.runtime.acceptance import AcceptMode
from app.engine.runtime.backend import LoadSettings, ModelInfo
from app.engine.runtime.backends import BACKEND_CHOICES
from app.engine.runtime.client import GenerationStream, RuntimeClient
from app.engine.runtime.demo_model import demo_model_path
from app.engine.runtime.depth_policy import AUTO, AUTO_MAX_DEPTH, DEFAULT_MTP_DEPTH
from app.engine.runtime.prompting import ChatMessage
from app.engine.runtime.request import (
    MAX_DRAFT_DEPTH,
    GenerationRequest,
    GenerationResult,
    check_mtp_depth,
)
from app.engine.runtime.sampling import SamplerSettings
from app.engine.runtime.stats import DecodeStats


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "chat",
        help="chat with a model (MTP speculative decoding)",
        description=(
            "Chat with a GGUF model using its MTP head for exact speculative decoding. Sampling "
            "order: temperature → top-k → top-p → min-p; --temp 0 is greedy."
        ),
    )
    parser.add_argument("--model", type=Path, help="a .gguf model (default: the bundled demo)")
    parser.add_argument("--backend", choices=BACKEND_CHOICES, default="auto")
    parser.add_argument(
        "--mtp-depth",
        type=depth_argument,
        default=DEFAULT_MTP_DEPTH,
        metavar="K|auto",
        help=(
            "tokens drafted per cycle by the MTP head; 0 = plain decoding; auto = chosen before "
            f"each cycle, 0 to {AUTO_MAX_DEPTH}, from the measured acceptance and cycle times "
            f"(default {DEFAULT_MTP_DEPTH})"
        ),
    )
    parser.add_argument(
        "--accept",
        choices=[mode.value for mode in AcceptMode],
        default=AcceptMode.LEVIATHAN_CHEN.value,
        help="lc = Leviathan–Chen acceptance (default), match = sample-and-compare",
    )
    parser.add_argument("--temp", type=float, default=0.6, metavar="T", help="default 0.6")
    parser.add_argument("--top-p", type=float, default=0.95, metavar="P", help="default 0.95")
    parser.add_argument("--top-k", type=int, default=20, metavar="N", help="0 = off (default 20)")
    parser.add_argument("--min-p", type=float, default=0.0, metavar="P", help="0 = off (default)")
    parser.add_argument("--seed", type=int, help="make sampling reproducible")
    parser.add_argument("--max-tokens", type=int, default=512, metavar="N")
    parser.add_argument("--system", metavar="TEXT", help="a system message to start with")
    parser.add_argument("--prompt", metavar="TEXT", help="answer this one message and exit")
    parser.add_argument("--ctx", type=int, default=0, metavar="N", help="context size in tokens")
    parser.add_argument("--threads", type=int, default=0, metavar="N", help="CPU threads")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object per answer (text, token ids, statistics)",
    )
    parser.set_defaults(func=run)


def depth_argument(text: str) -> int | str:
    """``auto`` or a whole number (its range is checked with the other settings)."""
    if text == AUTO:
        return AUTO
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a depth: use auto or 0 to {MAX_DRAFT_DEPTH}"
        ) from None


def _max_depth(args: argparse.Namespace) -> int:
    return AUTO_MAX_DEPTH if args.mtp_depth == AUTO else int(args.mtp_depth)


def run(args: argparse.Namespace) -> int:
    check_mtp_depth(_max_depth(args))
    model = args.model if args.model is not None else demo_model_path()
    settings = LoadSettings(
        context_length=args.ctx,
        threads=args.threads,
        max_draft_depth=max(_max_depth(args), LoadSettings().max_draft_depth),
    )
    sampler = SamplerSettings(
        temperature=args.temp,
        top_k=args.top_k,
        top_p=args.top_p,
        min_p=args.min_p,
        seed=args.seed,
    )
    history = [ChatMessage("system", args.system)] if args.system else []
    with RuntimeClient(model, backend=args.backend, settings=settings) as client:
        info = client.load()
        if not args.json:
            print(_describe(info, args), file=sys.stderr)
        if args.prompt is not None:
            _answer(client, args, sampler, [*history, ChatMessage("user", args.prompt)])
            return 0
        return _interactive(client, args, sampler, history)


def _interactive(
    client: RuntimeClient,
    args: argparse.Namespace,
    sampler: SamplerSettings,
    history: list[ChatMessage],
) -> int:
    start = list(history)
    if not args.json:
        print("Type a message; /reset forgets the conversation, /exit quits.", file=sys.stderr)
    while True:
        try:
            line = input("> " if sys.stdin.isatty() else "")
        except (EOFError, KeyboardInterrupt):
            return 0
        if line.strip() in ("/exit", "/quit"):
            return 0
        if line.strip() == "/reset":
            history = list(start)
            continue
        if not line.strip():
            continue
        history.append(ChatMessage("user", line))
        result = _answer(client, args, sampler, history)
        history.append(ChatMessage("assistant", result.text))


def _answer(
    client: RuntimeClient,
    args: argparse.Namespace,
    sampler: SamplerSettings,
    messages: list[ChatMessage],
) -> GenerationResult:
    request = GenerationRequest(
        messages=tuple(messages),
        max_tokens=args.max_tokens,
        sampler=sampler,
        mtp_depth=_max_depth(args),
        accept=AcceptMode(args.accept),
        adaptive_depth=args.mtp_depth == AUTO,
    )
    stream = client.start(request)
    result = _stream_to_stdout(stream, echo=not args.json)
    if args.json:
        info = client.info
        print(json.dumps({"model": str(info.path) if info else None, **result.to_dict()}))
    else:
        print(file=sys.stdout, flush=True)
        if result.note:
            print(f"note: {result.note}", file=sys.stderr)
        print(format_stats(result.stats, result.finish_reason), file=sys.stderr)
    return result


def _stream_to_stdout(stream: GenerationStream, *, echo: bool) -> GenerationResult:
    """Print chunks as they come; Ctrl-C cancels the answer instead of quitting."""
    try:
        for chunk in stream:
            if echo:
                sys.stdout.write(chunk.text)
                sys.stdout.flush()
    except KeyboardInterrupt:
        stream.cancel()
    return stream.wait()


def _describe(info: ModelInfo, args: argparse.Namespace) -> str:
    depth = (
        f"depth auto (0–{AUTO_MAX_DEPTH})" if args.mtp_depth == AUTO else f"depth {args.mtp_depth}"
    )
    head = (
        f"MTP head: {info.mtp_layers} layer(s), {depth}, {args.accept} acceptance"
        if info.mtp_available and _max_depth(args) > 0
        else "plain decoding"
    )
    return f"{info.path.name} · {info.architecture} · {info.backend} · {head}"


def format_stats(stats: DecodeStats, finish_reason: str) -> str:
    """One line of the request's figures (shared with ``bench decode``'s wording)."""
    parts = [
        f"{stats.generated_tokens} tokens ({finish_reason})",
        f"{stats.decode_tokens_per_second:.1f} tok/s decode",
        f"TTFT {stats.ttft_seconds * 1000:.0f} ms",
        f"prefill {stats.prefill_tokens_per_second:.0f} tok/s",
    ]
    if stats.depth > 0:
        acceptance = " / ".join(
            f"{rate:.0%}" if drafted else "—"
            for rate, drafted in zip(stats.acceptance_by_depth, stats.drafted_by_depth, strict=True)
        )
        parts.append(
            f"acceptance by depth {acceptance}, {stats.tokens_per_cycle:.2f} tokens/cycle, "
            f"{stats.mean_draft_depth:.2f} drafts/cycle"
        )
    return " · ".join(parts)
