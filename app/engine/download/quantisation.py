"""Which files of a repo make up one quantisation, so a download fetches that and nothing else.

Real GGUF repos hold many quantisations side by side (``Model-Q4_K_M.gguf``, ``Model-Q8_0.gguf``),
split the large ones into parts (``BF16/Model-BF16-00001-of-00003.gguf`` — llama.cpp loads the
first part and finds the others beside it), ship a vision projector (``mmproj-*.gguf``) and, for
MTP models, either keep the head inside the file (``…-mtp.gguf``) or beside it as a separate
``mtp-*.gguf``. This module reads those shapes from the file names alone: every split part counts
once, a projector or a head file is never a quantisation of its own, and choosing a quantisation
gives every part plus the separate head file and one projector (:meth:`GgufFiles.projector_for`):
the smallest lossless one (F16/BF16/F32: the projector is small beside the model, and a quantised
vision encoder loses detail) unless another is asked for by label or name; ``none`` fetches none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from app.engine.errors import DownloadError

SPLIT_PART = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)
QUANT_LABEL = re.compile(
    r"(?<![A-Za-z0-9])("
    r"(?:UD-)?(?:I?Q\d+_K(?:_[A-Z]+)?|IQ\d+_[A-Z]+|Q\d+_\d|TQ\d_\d|Q\d+_K)"
    r"|MXFP4(?:_MOE)?|BF16|F16|FP16|F32|FP8"
    r")(?![A-Za-z0-9])",
    re.IGNORECASE,
)
HEAD_INSIDE_SUFFIX = re.compile(r"[-_.]mtp$", re.IGNORECASE)
LOSSLESS_LABELS = ("F16", "FP16", "BF16", "F32")
"""Projector labels that lose nothing, preferred in this order at equal size (F16 runs on every
llama.cpp backend; BF16 not on all)."""
NO_PROJECTOR = "none"


@dataclass(frozen=True)
class Quantisation:
    """One quantisation of a GGUF repo: its label, its files (every part if split), their size."""

    label: str
    files: tuple[str, ...]
    size: int
    head_inside: bool

    @property
    def split(self) -> bool:
        return len(self.files) > 1

    @property
    def first_file(self) -> str:
        """The file llama.cpp is given (the first part of a split GGUF)."""
        return self.files[0]


@dataclass(frozen=True)
class GgufFiles:
    """The GGUF files of a repo sorted into quantisations, separate heads and projectors."""

    quantisations: tuple[Quantisation, ...]
    head_files: tuple[str, ...]
    projectors: tuple[str, ...]
    projector_sizes: tuple[int, ...] = ()
    """The size of each projector, in the order of ``projectors``."""

    def find(self, label: str, repo_id: str = "the repo") -> Quantisation:
        """The quantisation called ``label`` (case-insensitive), or a DownloadError naming those
        there are."""
        for quantisation in self.quantisations:
            if quantisation.label.lower() == label.lower():
                return quantisation
        have = ", ".join(q.label for q in self.quantisations) or "no GGUF quantisation"
        raise DownloadError(f"{repo_id} has no quantisation {label!r}; it has {have}")

    def files_for(
        self, label: str, repo_id: str = "the repo", projector: str = ""
    ) -> tuple[str, ...]:
        """What a download of ``label`` fetches: its files, plus the separate head file when
        the quantisation has no head inside, plus the projector :meth:`projector_for` picks."""
        quantisation = self.find(label, repo_id)
        heads = () if quantisation.head_inside else self.head_files
        chosen = self.projector_for(projector, repo_id)
        return (*quantisation.files, *heads, *((chosen,) if chosen else ()))

    def projector_for(self, asked: str = "", repo_id: str = "the repo") -> str | None:
        """The projector a download of any quantisation fetches (see :func:`choose_projector`)."""
        sizes = dict(zip(self.projectors, self.projector_sizes, strict=True))
        return choose_projector(sizes, asked, repo_id)


def choose_projector(
    sizes: Mapping[str, int], asked: str = "", repo_id: str = "the repo"
) -> str | None:
    """Among the projectors ``sizes`` lists (path → bytes): the one ``asked`` for (its label,
    e.g. ``Q8_0``, or its file name; ``none``: no projector), else the smallest lossless one,
    else the largest (the least lossy there is). None when there is none or none is wanted."""
    if asked.lower() == NO_PROJECTOR or not sizes:
        return None
    if asked:
        for path in sorted(sizes):
            if asked.lower() in (quant_label(path).lower(), _basename(path).lower()):
                return path
        have = ", ".join(_basename(path) for path in sorted(sizes))
        raise DownloadError(f"{repo_id} has no projector {asked!r}; it has {have}")
    lossless = [path for path in sizes if quant_label(path).upper() in LOSSLESS_LABELS]
    if lossless:
        return min(
            lossless,
            key=lambda path: (sizes[path], LOSSLESS_LABELS.index(quant_label(path).upper()), path),
        )
    return max(sizes, key=lambda path: (sizes[path], path))


def _basename(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def is_head_file(path: str) -> bool:
    return _basename(path).lower().startswith("mtp-") and path.lower().endswith(".gguf")


def is_projector(path: str) -> bool:
    return _basename(path).lower().startswith("mmproj") and path.lower().endswith(".gguf")


def quant_label(path: str) -> str:
    """The quantisation a GGUF file name says (``Q4_K_M``, ``BF16``…, with ``-mtp`` appended for a
    file with its head inside); the name without ``.gguf`` when it says none."""
    stem = SPLIT_PART.sub("", _basename(path))
    stem = stem[: -len(".gguf")] if stem.lower().endswith(".gguf") else stem
    head_inside = HEAD_INSIDE_SUFFIX.search(stem) is not None
    bare = HEAD_INSIDE_SUFFIX.sub("", stem)
    labels = QUANT_LABEL.findall(bare)
    label = labels[-1].upper() if labels else bare
    return f"{label}-mtp" if head_inside else label


def _path_label(unit: str, label: str) -> str:
    """The label of a file whose quantisation label another file has too: its path."""
    return f"{unit}-mtp" if label.endswith("-mtp") and not unit.endswith("-mtp") else unit


def gguf_files(sizes: Mapping[str, int]) -> GgufFiles:
    """Sort a repo's files (path → size) into quantisations; other files are ignored.

    The parts of one split file (same folder, same name before ``-0000N-of-0000M``) make one
    quantisation; files that only share a label (``a/x-Q4_K_M.gguf``, ``b/y-Q4_K_M.gguf``) are
    separate ones, each labelled by its path instead."""
    units: dict[str, list[str]] = {}
    heads: list[str] = []
    projectors: list[str] = []
    for path in sorted(sizes):
        if not path.lower().endswith(".gguf"):
            continue
        if is_head_file(path):
            heads.append(path)
        elif is_projector(path):
            projectors.append(path)
        else:
            units.setdefault(SPLIT_PART.sub("", path).removesuffix(".gguf"), []).append(path)
    labels = [quant_label(paths[0]) for paths in units.values()]
    groups = {
        label if labels.count(label) == 1 else _path_label(unit, label): paths
        for label, (unit, paths) in zip(labels, units.items(), strict=True)
    }
    quantisations = [
        Quantisation(
            label=label,
            files=tuple(paths),
            size=sum(sizes[path] for path in paths),
            head_inside=label.endswith("-mtp"),
        )
        for label, paths in groups.items()
    ]
    quantisations.sort(key=lambda q: q.size)
    return GgufFiles(
        tuple(quantisations),
        tuple(heads),
        tuple(projectors),
        tuple(sizes[path] for path in projectors),
    )
