"""How the model bar words a model: its picker entry and its info line (size, architecture, MTP
heads or the paired sidecar or drafter model, the memory estimate for the load options in Settings
with a "fits your machine" hint, and the context it gets and why).
"""

from __future__ import annotations

import html
from pathlib import Path

from app.engine.chat.context_choice import plan_load
from app.engine.chat.memory import fits_text
from app.engine.chat.model_files import DEMO, DOWNLOADED, GGUF, ModelDescription
from app.engine.load_options import LoadOptions
from app.engine.units import format_bytes
from app.ui.look.tones import tone_style
from app.ui.wording import in_window_words

ORIGIN_LABELS = {DEMO: "Demo", DOWNLOADED: "Downloaded"}
LLAMA_CPP_SIDECAR_NOTE = (
    "llama.cpp reads MTP heads only from inside the GGUF: add the head from this sidecar to "
    "draft with it"
)


def can_offer_graft(model: ModelDescription | None) -> bool:
    """A readable GGUF without MTP heads, paired with a sidecar: its head can be grafted in."""
    return (
        model is not None
        and model.kind == GGUF
        and model.problem is None
        and model.mtp_blocks == 0
        and model.sidecar is not None
    )


def sidecar_label(sidecar: Path) -> str:
    """``owner/name`` for a sidecar in a Hugging Face cache, else the file's name."""
    for parent in sidecar.parents:
        if parent.name.startswith("models--"):
            return parent.name.removeprefix("models--").replace("--", "/")
    return f"{sidecar.parent.name}/{sidecar.name}"


def item_text(model: ModelDescription) -> str:
    origin = ORIGIN_LABELS.get(model.origin, "Opened")
    where = f"{model.repo_id} · " if model.repo_id else ""
    flag = "" if model.runnable else "  (cannot run)"
    return f"{origin}: {where}{model.name}{flag}"


def describe_html(
    model: ModelDescription, memory_bytes: int | None, options: LoadOptions | None = None
) -> str:
    """The info line for ``model`` (HTML) when loaded with ``options`` (default: the defaults)."""
    if model.problem is not None:
        problem = html.escape(in_window_words(model.problem))
        return f"<span style='{tone_style('error')}'>{problem}</span>"
    parts = [html.escape(model.architecture), format_bytes(model.size_bytes)]
    if model.mtp_blocks and model.mtp_note is None:
        parts.append(f"MTP heads: {model.mtp_blocks} block(s) ✓")
    elif model.mtp_blocks:
        parts.append(f"MTP heads: {model.mtp_blocks} block(s), unusable here")
    elif model.drafter is not None:
        parts.append(f"MTP: drafter {format_bytes(model.drafter_bytes)} ✓")
    else:
        parts.append("MTP heads: none")
    plan = plan_load(model, options or LoadOptions(), memory_bytes=memory_bytes)
    memory = plan.memory
    if memory is not None:
        kv = f"{memory.kv_cache_type} " if model.kind == GGUF else ""
        kept = (
            f", kept states ≤ {format_bytes(memory.kept_state_bytes)}"
            if memory.kept_state_bytes
            else ""
        )
        parts.append(
            f"memory ≈ {format_bytes(memory.total_bytes)} (weights "
            f"{format_bytes(memory.weights_bytes)}, {kv}cache {format_bytes(memory.cache_bytes)} "
            f"for {memory.context} tokens, compute {format_bytes(memory.compute_bytes)}{kept}) — "
            f"{fits_text(memory, memory_bytes)}"
        )
        if options is not None and options.context_length:
            parts.append(f"context: {options.context_length:,} tokens, as set in Settings")
        elif plan.choice.reason:
            parts.append(f"context: {html.escape(plan.choice.reason, quote=False)}")
    lines = [" · ".join(parts)]
    if plan.kv_note is not None:
        note = f"KV cache f16: {plan.kv_note}"
        lines.append(f"<span style='{tone_style('warning')}'>{html.escape(note)}</span>")
    if model.sidecar is not None:
        note = f" — {LLAMA_CPP_SIDECAR_NOTE}" if model.kind == GGUF else ""
        lines.append(f"Sidecar paired: {html.escape(str(model.sidecar))}{html.escape(note)}")
    elif model.drafter is not None:
        lines.append(f"Drafter paired: {html.escape(str(model.drafter))}")
    elif model.mtp_note is not None and model.runnable:
        note = html.escape(in_window_words(model.mtp_note))
        lines.append(f"<span style='{tone_style('warning')}'>{note}</span>")
    if model.runnable_reason is not None:
        lines.append(
            f"<span style='{tone_style('warning')}'>"
            f"{html.escape(in_window_words(model.runnable_reason))}</span>"
        )
    return "<br>".join(lines)
