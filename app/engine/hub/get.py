"""``get``: from a repo name to a model that drafts with MTP, in one job.

Why: a conversion found by search needs up to four steps before it drafts — pick a quantisation,
download just its files, fetch the sidecar of its base model, graft the head (joining a split GGUF
first). :func:`plan_get` decides them from the repo's files and the catalog, before anything is
downloaded; :class:`GetJob` runs them as one recorded job (resumable downloads, pausable, retried
from its stored parameters) and ends with the path of the ready model.

How each quantisation gets its head (:attr:`GetPlan.way`):

- ``head inside``: the file already has it (``…-mtp.gguf``, or an original release): download;
- ``separate head file``: a trunk converted with ``--no-mtp`` and the head beside it as an
  ``mtp-*.gguf`` (``convert_hf_to_gguf.py --mtp``): both are downloaded and the head file's
  tensors are copied into a copy of the trunk (:mod:`app.engine.graft.head_file`), a split trunk
  joined first; preferred to a sidecar, since the head was converted with this very trunk;
- ``sidecar grafted``: a GGUF without a head whose base model has a sidecar (in the catalog or
  found on the Hub): download the quantisation and ``mtp.safetensors``, join a split GGUF into
  one file (:mod:`app.engine.graft.split` says why), graft; the grafted copy is the ready model;
- ``sidecar paired``: an MLX or safetensors conversion with a sidecar: download both into the
  cache, where chat pairs them (:func:`app.engine.chat.sidecar.find_sidecar`);
- ``separate drafter``: a model that drafts with a separate drafter model (Gemma 4's assistant,
  :mod:`app.engine.hub.drafter_lookup`): one quantisation of the trunk and one of the drafter are
  downloaded — exactly those files, never a drafter taken for a head file to graft — and the
  pair is checked as chat will pair it (:mod:`app.engine.drafter.pairing`);
- ``no MTP head``: downloaded, and said so.
"""

from __future__ import annotations

import glob
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.engine.chat.sidecar import find_sidecar
from app.engine.download import CACHE, DownloadJob, DownloadRequest
from app.engine.download.job import DownloadResult
from app.engine.download.quantisation import (
    NO_PROJECTOR,
    choose_projector,
    is_head_file,
    quant_label,
)
from app.engine.drafter.pairing import check_pair, find_drafter
from app.engine.errors import DownloadError, DrafterError, MtpStudioError
from app.engine.gguf_header import read_gguf_header
from app.engine.graft.download_job import SIDECAR_FILE
from app.engine.graft.job import GraftRequest, default_output_path
from app.engine.graft.split import is_split_part, join_split_gguf, joined_name
from app.engine.hub.fit import FITS
from app.engine.hub.gguf_peek import mtp_blocks_in
from app.engine.hub.search import (
    DRAFTER,
    GGUF,
    HEAD_INSIDE,
    SEPARATE_HEAD,
    QuantOption,
    RepoHit,
    describe_repo_id,
)
from app.engine.jobs import JobContext, ResultEvent

GET_KIND = "get"
GRAFTED = "sidecar grafted"
PAIRED = "sidecar paired"
NO_MTP = "no MTP head"


@dataclass(frozen=True)
class GetPlan:
    """What ``get`` will do for one repo and quantisation."""

    repo_id: str
    format: str
    quant: str
    files: tuple[str, ...]
    way: str
    sidecar_repo: str | None = None
    drafter_repo: str | None = None
    drafter_files: tuple[str, ...] = ()
    """The one drafter quantisation fetched beside the trunk (way ``separate drafter``)."""
    projector: str | None = None
    """The vision projector fetched beside the model (a GGUF repo's, when it ships any)."""

    @property
    def title(self) -> str:
        return f"Get {self.repo_id} ({self.quant}, {self.way})"

    def to_params(self) -> dict[str, Any]:
        return {
            "repo_id": self.repo_id,
            "format": self.format,
            "quant": self.quant,
            "files": list(self.files),
            "way": self.way,
            "sidecar_repo": self.sidecar_repo,
            "drafter_repo": self.drafter_repo,
            "drafter_files": list(self.drafter_files),
            "projector": self.projector,
        }

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> GetPlan:
        return cls(
            repo_id=str(params["repo_id"]),
            format=str(params["format"]),
            quant=str(params["quant"]),
            files=tuple(params["files"]),
            way=str(params["way"]),
            sidecar_repo=params.get("sidecar_repo"),
            drafter_repo=params.get("drafter_repo"),
            drafter_files=tuple(params.get("drafter_files") or ()),
            projector=params.get("projector"),
        )


def plan_get(
    repo_id: str,
    quant: str = "",
    *,
    endpoint: str,
    token: str | None,
    sidecars: Mapping[str, str],
    memory_bytes: int | None,
    drafters: Mapping[str, str] | None = None,
    projector: str = "",
) -> GetPlan:
    """The plan for ``repo_id``; ``quant`` empty: the largest quantisation that fits;
    ``projector``: a projector's label or name, ``none``, or empty for the smallest lossless."""
    hit = describe_repo_id(
        repo_id,
        endpoint=endpoint,
        token=token,
        sidecars=sidecars,
        memory_bytes=memory_bytes,
        drafters=drafters,
    )
    if not hit.quantisations:
        raise DownloadError(f"{repo_id} holds no GGUF, MLX or safetensors model files")
    return plan_for(hit, _chosen(hit.quantisations, quant, repo_id), projector)


def plan_for(hit: RepoHit, option: QuantOption, projector: str = "") -> GetPlan:
    """The plan for one quantisation of a search hit (what the Discover page's Get runs)."""
    chosen = (
        choose_projector(dict.fromkeys(hit.projectors, 0), projector, hit.repo_id)
        if projector
        else hit.projector
    )
    if option.mtp == DRAFTER and hit.drafter is not None:
        if hit.drafter.problem:
            raise DrafterError(hit.drafter.problem)  # before anything is downloaded
        drafter = hit.drafter.choose(option.label)
        return GetPlan(
            hit.repo_id,
            hit.format,
            option.label,
            option.files,
            DRAFTER,
            drafter_repo=hit.drafter.repo_id,
            drafter_files=drafter.files,
            projector=chosen,
        )
    if option.mtp in (HEAD_INSIDE, SEPARATE_HEAD):
        way = option.mtp
    elif hit.sidecar_repo:
        way = GRAFTED if hit.format == GGUF else PAIRED
    else:
        way = NO_MTP
    return GetPlan(
        hit.repo_id,
        hit.format,
        option.label,
        option.files,
        way,
        hit.sidecar_repo,
        projector=chosen,
    )


def _chosen(options: tuple[QuantOption, ...], quant: str, repo_id: str) -> QuantOption:
    if quant:
        for option in options:
            if option.label.lower() == quant.lower():
                return option
        have = ", ".join(option.label for option in options)
        raise DownloadError(f"{repo_id} has no quantisation {quant!r}; it has {have}")
    fitting = [option for option in options if option.fit.verdict == FITS]
    return max(fitting, key=lambda option: option.size) if fitting else options[0]


@dataclass(frozen=True)
class GetResult:
    ready_path: Path
    way: str
    note: str
    model: DownloadResult
    drafter: Path | None = None
    drafter_download: DownloadResult | None = None
    projector: Path | None = None

    def summary(self) -> dict[str, Any]:
        return {
            **self.model.summary(),
            "ready_path": str(self.ready_path),
            "way": self.way,
            "note": self.note,
            "drafter": str(self.drafter) if self.drafter else None,
            "drafter_downloaded_bytes": (
                self.drafter_download.downloaded_bytes if self.drafter_download else 0
            ),
            "projector": str(self.projector) if self.projector else None,
        }


class GetJob:
    """Callable with a :class:`JobContext`; pausable while one of its downloads runs."""

    def __init__(self, plan: GetPlan, endpoint: str, cache_dir: Path, grafted_dir: Path) -> None:
        self.plan = plan
        self.endpoint = endpoint
        self.cache_dir = Path(cache_dir)
        self.grafted_dir = Path(grafted_dir)
        self._model = DownloadJob(self._request(plan.repo_id, **self._trunk_choice()))
        self._sidecar = (
            DownloadJob(self._request(plan.sidecar_repo, include=(SIDECAR_FILE,)))
            if plan.sidecar_repo and plan.way in (GRAFTED, PAIRED)
            else None
        )
        self._drafter = (
            DownloadJob(self._request(plan.drafter_repo, include=_exactly(plan.drafter_files)))
            if plan.drafter_repo and plan.way == DRAFTER
            else None
        )

    def _trunk_choice(self) -> dict[str, Any]:
        """Which trunk files: the quantisation's (with a separate head file and the chosen
        projector), or, beside a drafter, exactly the quantisation's files and the projector (a
        drafter named ``mtp-*.gguf`` is not a head file)."""
        if self.plan.format != GGUF:
            return {}
        if self.plan.way == DRAFTER:
            projector = (self.plan.projector,) if self.plan.projector else ()
            return {"include": _exactly((*self.plan.files, *projector))}
        return {"quant": self.plan.quant, "projector": self._projector()}

    def _projector(self) -> str:
        """The projector argument of the model's download: the plan's file, or none."""
        if self.plan.format != GGUF:
            return ""
        return self.plan.projector.rsplit("/", 1)[-1] if self.plan.projector else NO_PROJECTOR

    def _request(self, repo_id: str, **choice: Any) -> DownloadRequest:
        return DownloadRequest(repo_id, str(self.cache_dir), self.endpoint, layout=CACHE, **choice)

    def to_params(self) -> dict[str, Any]:
        return {
            "plan": self.plan.to_params(),
            "endpoint": self.endpoint,
            "cache_dir": str(self.cache_dir),
            "grafted_dir": str(self.grafted_dir),
        }

    def _downloads(self) -> list[DownloadJob]:
        return [job for job in (self._model, self._sidecar, self._drafter) if job is not None]

    def pause(self) -> None:
        for download in self._downloads():
            download.pause()

    def resume(self) -> None:
        for download in self._downloads():
            download.resume()

    @property
    def paused(self) -> bool:
        return any(download.paused for download in self._downloads())

    def __call__(self, ctx: JobContext) -> GetResult:
        plan = self.plan
        model = self._model(ctx)
        first = model.location / plan.files[0] if plan.format == GGUF else model.location
        projector = model.location / plan.projector if plan.projector else None
        seen = (
            f"; its vision projector {projector.name} is in {projector.parent}" if projector else ""
        )
        if plan.way == DRAFTER:
            fetched, drafter, note = self._fetch_drafter(first, ctx)
            result = GetResult(
                first, plan.way, note + seen, model, drafter, fetched, projector=projector
            )
            ctx.emit(ResultEvent(result.summary()))
            return result
        if plan.way == GRAFTED:
            ready, note = self._graft(first, ctx)
        elif plan.way == PAIRED:
            ready, note = model.location, self._pair(model.location, ctx)
        elif plan.way == SEPARATE_HEAD:
            head = model.location / head_file_for(plan.quant, model.files, plan.files)
            ready, note = self._graft_into(first, head, f"the separate head file {head.name}", ctx)
        elif plan.way == HEAD_INSIDE:
            ready, note = first, "the MTP head is inside the file"
        else:
            ready = first
            note = "no MTP head: no head in the file and no catalog sidecar for its base model"
        result = GetResult(ready, plan.way, note + seen, model, projector=projector)
        ctx.emit(ResultEvent(result.summary()))
        return result

    def _fetch_drafter(self, trunk: Path, ctx: JobContext) -> tuple[DownloadResult, Path, str]:
        """Download the drafter, check it fits the trunk, and say whether chat pairs them."""
        assert self._drafter is not None
        fetched = self._drafter(ctx)
        drafter = fetched.location
        if self.plan.format == GGUF:
            drafter = fetched.location / self.plan.drafter_files[0]
        check_pair(trunk, drafter)
        found = find_drafter(trunk, [self.cache_dir], self.plan.repo_id)
        if found.path is not None and found.path.resolve() == drafter.resolve():
            return (
                fetched,
                drafter,
                f"chat drafts with {drafter.name}, which it finds for the model",
            )
        return (
            fetched,
            drafter,
            (
                f"the drafter {drafter} is in the cache, but its repo name does not start with the "
                "model's <base>-assistant, so chat pairs it only when the model is opened from its "
                "catalog entry"
            ),
        )

    def _graft(self, base: Path, ctx: JobContext) -> tuple[Path, str]:
        assert self._sidecar is not None
        blocks = mtp_blocks_in(read_gguf_header(base).metadata)
        if blocks:
            return base, f"the file already has its MTP head ({blocks} block(s)); nothing grafted"
        sidecar = self._sidecar(ctx).location / SIDECAR_FILE
        if not sidecar.is_file():
            raise MtpStudioError(
                f"{self.plan.sidecar_repo} has no {SIDECAR_FILE}; check the catalog entry's "
                "mtp_sidecar_repo"
            )
        return self._graft_into(base, sidecar, f"the head of {self.plan.sidecar_repo}", ctx)

    def _graft_into(self, base: Path, head: Path, what: str, ctx: JobContext) -> tuple[Path, str]:
        """Graft ``head`` (a sidecar or a head GGUF) into a copy of ``base``, joining a split
        base first; the copy's path and what was done."""
        self.grafted_dir.mkdir(parents=True, exist_ok=True)
        if not is_split_part(base):
            out = default_output_path(base, self.grafted_dir)
            GraftRequest(base, head, out).run(ctx)
            return out, f"{what} was grafted into a copy"
        joined = self.grafted_dir / f".joining-{joined_name(base)}"
        ctx.stage("join", f"{len(self.plan.files)} parts of {base.name}")
        try:
            join_split_gguf(base, joined, ctx)
            out = self.grafted_dir / f"{Path(joined_name(base)).stem}-mtp.gguf"
            GraftRequest(joined, head, out).run(ctx)
        finally:
            joined.unlink(missing_ok=True)
        return out, (
            f"the {len(self.plan.files)} parts were joined into one file and {what} grafted into it"
        )

    def _pair(self, model: Path, ctx: JobContext) -> str:
        assert self._sidecar is not None
        sidecar = self._sidecar(ctx).location / SIDECAR_FILE
        found = find_sidecar(model, self.plan.repo_id, [self.cache_dir])
        if found is not None:
            return f"chat pairs it with the sidecar {found}"
        return (
            f"the sidecar {sidecar} is in the cache, but its repo name does not follow "
            "<base-slug>-mtp, so chat pairs it only when the model is opened from its catalog entry"
        )


def _exactly(paths: Sequence[str]) -> tuple[str, ...]:
    """Download patterns that match exactly ``paths`` (glob characters in names escaped)."""
    return tuple(glob.escape(path) for path in paths)


def head_file_for(quant: str, downloaded: Sequence[str], trunk_files: Sequence[str]) -> str:
    """The separate head file to graft: among the downloaded files that are not the trunk's,
    the one named for the same quantisation, else the first."""
    heads = sorted(name for name in downloaded if name not in trunk_files and is_head_file(name))
    if not heads:
        raise MtpStudioError(
            "the repo's separate head file (mtp-*.gguf) was not downloaded; run get again"
        )
    return next((name for name in heads if quant_label(name) == quant), heads[0])


def get_job_from_params(params: dict[str, Any]) -> GetJob:
    try:
        return GetJob(
            GetPlan.from_params(params["plan"]),
            str(params["endpoint"]),
            Path(params["cache_dir"]),
            Path(params["grafted_dir"]),
        )
    except KeyError as exc:
        raise MtpStudioError(f"the stored get job lacks its {exc.args[0]!r} parameter") from None
