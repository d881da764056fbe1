"""The vision projectors (``mmproj-*.gguf``) that belong to a GGUF model, so the library lists
them with it instead of dropping them, and a deletion keeps or removes them with it.

Vision GGUF repos ship the language model (often in several quantisations) and one projector
file beside it; llama.cpp loads the projector next to the model for image input. A projector is
no model on its own (the picker skips it), so it belongs to every GGUF model in its folder: it is
shown with each of them, stays while one of them stays, and goes with the last one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.engine.chat.model_files import GGUF, ModelDescription
from app.engine.download.quantisation import choose_projector, is_head_file, is_projector


@dataclass(frozen=True)
class Projector:
    path: Path
    size_bytes: int

    @property
    def name(self) -> str:
        return self.path.name


def projectors_of(description: ModelDescription) -> tuple[Projector, ...]:
    """The projectors in the folder of a GGUF model (none for a model folder or a bad file)."""
    if description.kind != GGUF or description.problem is not None:
        return ()
    return tuple(
        Projector(path, _size(path))
        for path in sorted(description.path.parent.glob("*.gguf"))
        if is_projector(path.name) and path.is_file()
    )


def projector_beside(model: Path) -> Path | None:
    """The projector a GGUF model is run with when none is named: of those in its folder, the
    one a download would fetch (the smallest lossless, :func:`choose_projector`)."""
    if model.suffix.lower() != ".gguf":
        return None
    sizes = {
        path.name: _size(path)
        for path in model.parent.glob("*.gguf")
        if is_projector(path.name) and path.is_file()
    }
    chosen = choose_projector(sizes)
    return model.parent / chosen if chosen else None


def other_models_beside(description: ModelDescription, own_files: set[Path]) -> bool:
    """Whether the model's folder holds another model's GGUF (not its own parts, a projector or a
    separate head file), which keeps the projectors there."""
    for path in description.path.parent.glob("*.gguf"):
        if path in own_files or is_projector(path.name) or is_head_file(path.name):
            continue
        return True
    return False


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
