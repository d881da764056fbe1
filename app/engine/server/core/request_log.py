"""One line per answered request: what the Server panel's live log shows and ``serve`` prints.

``serve --log-format json`` writes each :class:`RequestLogEntry` as one JSON object per line on
stderr (the panel parses them); the default is a short human line. Neither ever holds the API
key or the prompt.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from app.engine.runtime.core.request import GenerationResult
from app.engine.runtime.speculative.depth_policy import AUTO
from app.engine.server.core.depth import reported_depth

LOG_EVENT = "request"


@dataclass(frozen=True)
class RequestLogEntry:
    method: str
    path: str
    status: int
    seconds: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    decode_tokens_per_second: float = 0.0
    acceptance_by_depth: tuple[float, ...] = ()
    tokens_per_cycle: float = 0.0
    mtp_depth: int | str = 0
    """``"auto"`` where the depth was chosen each cycle, else the fixed depth (0 = plain)."""
    drafts_per_cycle: float = 0.0
    error: str | None = None
    passed_over: tuple[str, ...] = ()
    """What the request held that the prompt left out (``thinking block at messages[1]``)."""

    @classmethod
    def for_generation(
        cls, method: str, path: str, seconds: float, result: GenerationResult, reason: str
    ) -> RequestLogEntry:
        stats = result.stats
        return cls(
            method=method,
            path=path,
            status=200,
            seconds=seconds,
            prompt_tokens=result.prompt_token_count,
            completion_tokens=stats.generated_tokens,
            finish_reason=reason,
            decode_tokens_per_second=stats.decode_tokens_per_second,
            acceptance_by_depth=stats.acceptance_by_depth,
            tokens_per_cycle=stats.tokens_per_cycle,
            mtp_depth=reported_depth(stats),
            drafts_per_cycle=stats.mean_draft_depth,
        )

    def to_json(self) -> str:
        return json.dumps({"event": LOG_EVENT, **asdict(self)})

    @classmethod
    def from_json(cls, line: str) -> RequestLogEntry | None:
        """The entry a JSON log line holds, or None for any other line."""
        try:
            data = json.loads(line)
        except ValueError:
            return None
        if not isinstance(data, dict) or data.pop("event", None) != LOG_EVENT:
            return None
        data["acceptance_by_depth"] = tuple(data.get("acceptance_by_depth", ()))
        data["passed_over"] = tuple(data.get("passed_over", ()))
        try:
            return cls(**data)
        except TypeError:
            return None

    def to_text(self) -> str:
        line = f"{self.method} {self.path} {self.status} {self.seconds * 1000:.0f} ms"
        if self.finish_reason is not None:
            line += (
                f" · {self.prompt_tokens}+{self.completion_tokens} tokens ({self.finish_reason})"
                f" · {self.decode_tokens_per_second:.1f} tok/s"
            )
            if self.acceptance_by_depth:
                rates = " / ".join(f"{rate:.0%}" for rate in self.acceptance_by_depth)
                line += f" · acceptance {rates}"
            if self.mtp_depth == AUTO:
                line += f" · depth auto, {self.drafts_per_cycle:.2f} drafts/cycle"
        if self.passed_over:
            line += f" · passed over: {', '.join(self.passed_over)}"
        if self.error:
            line += f" · {self.error}"
        return line
