"""What the user asked to download, in a form that survives a restart (for retry and resume)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.engine.errors import DownloadError
from app.engine.safepath import plain_name_problem, relative_path_problem

CACHE = "cache"
FOLDER = "folder"


@dataclass(frozen=True)
class DownloadRequest:
    """A repo, which of its files, and where they go.

    ``layout`` is ``"cache"`` (the Hugging Face cache layout under ``destination``, shared with
    other tools) or ``"folder"`` (plain files under ``destination``). ``include`` holds glob
    patterns; empty means every file. ``quant`` names one GGUF quantisation instead (``Q4_K_M``):
    its files, every part of a split one, a separate ``mtp-*.gguf`` head file if the repo has
    one, and one vision projector if it has any: ``projector`` names it (a label or a file name;
    ``none``: no projector; empty: the smallest lossless one); see
    :mod:`app.engine.download.quantisation`.
    """

    repo_id: str
    destination: str
    endpoint: str
    revision: str = "main"
    include: tuple[str, ...] = ()
    layout: str = CACHE
    quant: str = ""
    projector: str = ""

    def __post_init__(self) -> None:
        owner, _, name = self.repo_id.partition("/")
        if not owner or not name or plain_name_problem(owner) or plain_name_problem(name):
            raise DownloadError(
                f"repo {self.repo_id!r} is not of the form owner/name; "
                "type it as it appears in the Hub URL, e.g. Qwen/Qwen3.6-27B"
            )
        if (problem := relative_path_problem(self.revision)) is not None:
            raise DownloadError(
                f"revision {self.revision!r} is refused: {problem}; use a branch, tag or "
                "commit id as it appears on the Hub, e.g. main"
            )
        if self.layout not in (CACHE, FOLDER):
            raise DownloadError(
                f"layout {self.layout!r} is unknown; use {CACHE!r} (Hugging Face cache) "
                f"or {FOLDER!r} (plain folder)"
            )
        if self.projector and not self.quant:
            raise DownloadError(
                "a projector is chosen with a quantisation: pass --quant with --projector"
            )
        if self.quant and self.include:
            raise DownloadError(
                "choose files either by quantisation (--quant) or by pattern (--include), not both"
            )
        if not self.destination:
            raise DownloadError("no destination folder given; choose where the files go")

    def to_params(self) -> dict[str, Any]:
        return {
            "repo_id": self.repo_id,
            "destination": self.destination,
            "endpoint": self.endpoint,
            "revision": self.revision,
            "include": list(self.include),
            "layout": self.layout,
            "quant": self.quant,
            "projector": self.projector,
        }

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> DownloadRequest:
        try:
            return cls(
                repo_id=params["repo_id"],
                destination=params["destination"],
                endpoint=params["endpoint"],
                revision=params.get("revision", "main"),
                include=tuple(params.get("include", ())),
                layout=params.get("layout", CACHE),
                quant=params.get("quant", ""),
                projector=params.get("projector", ""),
            )
        except KeyError as exc:
            raise DownloadError(
                f"stored download is missing {exc.args[0]!r}; start it again from the wizard"
            ) from None

    @property
    def title(self) -> str:
        files = self.quant or (", ".join(self.include) if self.include else "all files")
        return f"Download {self.repo_id} ({files})"
