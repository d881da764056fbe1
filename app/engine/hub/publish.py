"""The publish job: an MTP sidecar from a source repo on the Hub to a sidecar repo, in one commit.

Why this order (docs/architecture.md#the-publish-pipeline):

1. ``preflight`` — token and write permission, before any heavy work.
2. Already published (the sidecar file exists) → say so and stop, unless ``force``.
3. ``pin`` — the source branch is resolved to one commit id; every read uses it.
4. ``detect`` / ``extract`` (the extractor's stages) — only the MTP tensors' bytes are fetched,
   dequantised to BF16 and streamed into scratch, hashed while written. No repo exists yet, so a
   checkpoint without heads leaves nothing behind on the Hub.
5. ``card`` — README.md with the source's license, unchanged, and the provenance.
6. ``upload`` — the sidecar repo is created only now, then one commit holds both files; progress
   counts bytes actually sent.
7. ``collection`` — the repo joins its owner's "MTP Sidecars" collection (unless disabled).
8. ``clean`` — the scratch copy is deleted. Any failure after extraction keeps it and says where
   it is; the next run of the same publish reuses it instead of extracting again.

The GUI's publish wizard and the CLI run this same function; both render its events.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx2
from huggingface_hub import CommitInfo, HfApi, constants
from huggingface_hub.errors import HfHubHTTPError

from app import TOOL_NAME, __version__
from app.engine.errors import JobCancelled, MtpStudioError, PublishError
from app.engine.hub.access import check_write_access, resolve_token
from app.engine.hub.card import SidecarProvenance, license_fields, render_card, utc_now
from app.engine.hub.collection import COLLECTION_TITLE, collection_enabled, file_into_collection
from app.engine.hub.failures import hub_error
from app.engine.hub.receipt import (
    ExtractionReceipt,
    discard,
    receipt_path,
    reusable_receipt,
    save_receipt,
)
from app.engine.hub.source import HubSource, PinnedRepo, pin_repo
from app.engine.hub.upload import commit_sidecar
from app.engine.jobs import JobContext, ProgressEvent, ResultEvent, StageEvent
from app.engine.mtp import extract_mtp
from app.engine.publish_plan import MtpSidecarPlan

PUBLISHED = "published"
ALREADY_PUBLISHED = "already-published"


@dataclass(frozen=True)
class PublishOptions:
    """How to publish; the token is resolved at run time and never stored here by the CLI."""

    force: bool = False
    token: str | None = None
    endpoint: str = ""  # "" → HF_ENDPOINT, else https://huggingface.co
    file_in_collection: bool = True
    source_revision: str = "main"


@dataclass(frozen=True)
class PublishResult:
    """What a publish did, with the figures the monitor and the CLI show."""

    outcome: str  # PUBLISHED or ALREADY_PUBLISHED
    source_repo: str
    sidecar_repo: str
    filename: str
    repo_url: str
    file_url: str
    source_sha: str = ""
    commit_url: str = ""
    collection_url: str = ""
    layout: str = ""
    layer_indices: tuple[int, ...] = ()
    tensor_count: int = 0
    bytes_needed: int = 0
    bytes_fetched: int = 0
    sidecar_bytes: int = 0
    bytes_uploaded: int = 0
    sha256: str = ""
    reused_scratch: bool = False
    seconds_extract: float = 0.0
    seconds_upload: float = 0.0
    seconds_total: float = 0.0
    warnings: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        summary = asdict(self)
        summary["layer_indices"] = list(self.layer_indices)
        summary["warnings"] = list(self.warnings)
        return summary


def resolve_endpoint(endpoint: str = "") -> str:
    return (endpoint or constants.ENDPOINT).rstrip("/")


def publish_sidecar(
    plan: MtpSidecarPlan, options: PublishOptions, ctx: JobContext | None = None
) -> PublishResult:
    """Publish the MTP sidecar described by ``plan`` (see the module docstring for the steps)."""
    return _Publish(plan, options, ctx or JobContext()).run()


class _Publish:
    """One run of the publish job; each step is a method so the order above reads top-down."""

    def __init__(self, plan: MtpSidecarPlan, options: PublishOptions, ctx: JobContext) -> None:
        self.plan = plan
        self.options = options
        self.ctx = ctx
        self.endpoint = resolve_endpoint(options.endpoint)
        self.started = time.perf_counter()
        self.warnings: list[str] = []
        self.output = plan.output_path
        self.repo_url = f"{self.endpoint}/{plan.sidecar_repo}"
        self.file_url = f"{self.repo_url}/blob/main/{plan.filename}"

    def run(self) -> PublishResult:
        plan, ctx = self.plan, self.ctx
        ctx.stage("preflight", plan.sidecar_repo)
        token = resolve_token(self.options.token)
        api = HfApi(
            endpoint=self.endpoint, token=token, library_name=TOOL_NAME, library_version=__version__
        )
        account = check_write_access(api, plan.sidecar_repo)
        ctx.log(f"signed in to {self.endpoint} as {account.name}; {plan.sidecar_repo} is writable")
        if account.sidecar_repo_exists and not self.options.force and self._published(api):
            return self._skip(api)

        ctx.stage("pin", plan.source_repo)
        pinned = pin_repo(
            plan.source_repo, self.options.source_revision, endpoint=self.endpoint, token=token
        )
        ctx.log(f"pinned {plan.source_repo} at commit {pinned.sha}")
        self.output.parent.mkdir(parents=True, exist_ok=True)
        with HubSource(
            pinned,
            endpoint=self.endpoint,
            token=token,
            fallback_dir=self.output.parent,
            log=ctx.log,
        ) as source:
            receipt, reused, extract_seconds = self._extract(source, pinned)
            try:
                ctx.stage("card", plan.sidecar_repo)
                readme = self._card(source, receipt)
            except Exception as exc:
                raise self._kept_in_scratch(exc, "writing the model card") from exc
            bytes_fetched = source.bytes_fetched

        upload_started = time.perf_counter()
        commit, uploaded = self._upload(api, receipt, readme, pinned.sha)
        upload_seconds = time.perf_counter() - upload_started

        # The commit exists: the remaining steps are quick and no longer stop when cancelled.
        collection_url = self._collection(api)
        ctx.emit(StageEvent("clean"))
        discard(self.output)
        ctx.log(f"removed the scratch copy {self.output}")
        return self._finish(
            PublishResult(
                outcome=PUBLISHED,
                source_repo=plan.source_repo,
                sidecar_repo=plan.sidecar_repo,
                filename=plan.filename,
                repo_url=self.repo_url,
                file_url=self.file_url,
                source_sha=pinned.sha,
                commit_url=commit.commit_url,
                collection_url=collection_url,
                layout=receipt.layout,
                layer_indices=receipt.layer_indices,
                tensor_count=receipt.tensor_count,
                bytes_needed=receipt.bytes_needed,
                bytes_fetched=bytes_fetched,
                sidecar_bytes=receipt.size,
                bytes_uploaded=uploaded,
                sha256=receipt.sha256,
                reused_scratch=reused,
                seconds_extract=extract_seconds,
                seconds_upload=upload_seconds,
            )
        )

    # -- steps -----------------------------------------------------------------------------

    def _upload(
        self, api: HfApi, receipt: ExtractionReceipt, readme: str, source_sha: str
    ) -> tuple[CommitInfo, int]:
        """Commit the sidecar and its card to the sidecar repo; the commit and bytes sent."""
        plan, ctx = self.plan, self.ctx
        try:
            ctx.stage("upload", f"hf://{plan.sidecar_repo}/{plan.filename}")
            api.create_repo(plan.sidecar_repo, exist_ok=True)
            progress = ctx.progress_reporter("upload", receipt.size)
            commit, uploaded = commit_sidecar(
                api,
                plan.sidecar_repo,
                self.output,
                receipt.sha256,
                readme,
                filename=plan.filename,
                message=f"Add MTP sidecar of {plan.source_repo}@{source_sha[:12]}",
                description=f"Extracted from {plan.source_repo} at commit {source_sha} "
                f"by {TOOL_NAME} {__version__}.",
                on_position=progress.update,
            )
        except Exception as exc:
            raise self._kept_in_scratch(exc, f"uploading to {plan.sidecar_repo}") from exc
        if progress.done != receipt.size:  # the Hub had the bytes already: nothing was sent
            ctx.emit(ProgressEvent("upload", receipt.size, receipt.size))
        ctx.log(f"committed {commit.commit_url}")
        return commit, uploaded

    def _published(self, api: HfApi) -> bool:
        """Whether the sidecar file is on the repo already; a failed lookup means "no"."""
        try:
            return api.file_exists(self.plan.sidecar_repo, self.plan.filename)
        except Exception as exc:
            reason = hub_error(exc, "checking for an earlier publish", self.endpoint)
            self._warn(f"{reason}; publishing anyway")
            return False

    def _skip(self, api: HfApi) -> PublishResult:
        plan = self.plan
        self.ctx.log(
            f"hf://{plan.sidecar_repo}/{plan.filename} already covers {plan.source_repo}; "
            "nothing to publish (use --force to extract and publish it again)"
        )
        collection_url = self._collection(api)
        return self._finish(
            PublishResult(
                outcome=ALREADY_PUBLISHED,
                source_repo=plan.source_repo,
                sidecar_repo=plan.sidecar_repo,
                filename=plan.filename,
                repo_url=self.repo_url,
                file_url=self.file_url,
                collection_url=collection_url,
            )
        )

    def _extract(
        self, source: HubSource, pinned: PinnedRepo
    ) -> tuple[ExtractionReceipt, bool, float]:
        if not self.options.force:
            earlier = reusable_receipt(self.output, pinned.repo_id, pinned.sha, __version__)
            if earlier is not None:
                self.ctx.log(
                    f"reusing {self.output}, extracted earlier from the same commit "
                    "(use --force to extract again)"
                )
                return earlier, True, 0.0
        receipt_path(self.output).unlink(missing_ok=True)
        extracted = extract_mtp(
            source,
            self.output,
            self.ctx,
            extra_metadata={"source_repo": pinned.repo_id, "source_revision": pinned.sha},
        )
        receipt = ExtractionReceipt(
            source_repo=pinned.repo_id,
            source_sha=pinned.sha,
            layout=extracted.layout,
            layer_indices=extracted.layer_indices,
            tensor_count=extracted.tensor_count,
            bytes_needed=extracted.bytes_needed,
            size=extracted.bytes_written,
            sha256=extracted.sha256,
            tool_version=__version__,
        )
        save_receipt(self.output, receipt)
        return receipt, False, extracted.seconds

    def _card(self, source: HubSource, receipt: ExtractionReceipt) -> str:
        plan = self.plan
        readme = None
        if "README.md" in source.file_sizes():
            readme = source.read_bytes("README.md").decode("utf-8", errors="replace")
        try:
            licence = license_fields(readme)
        except ValueError as exc:
            licence = {}
            self._warn(
                f"the model card of {plan.source_repo} cannot be read ({exc}); the sidecar's "
                "card carries no license — add it by hand"
            )
        if not licence and readme is not None:
            self._warn(f"the model card of {plan.source_repo} names no license; neither will ours")
        elif readme is None:
            self._warn(f"{plan.source_repo} has no README.md, so no license to copy")
        provenance = SidecarProvenance(
            source_repo=plan.source_repo,
            source_sha=receipt.source_sha,
            layout=receipt.layout,
            layer_indices=receipt.layer_indices,
            tensor_count=receipt.tensor_count,
            sidecar_bytes=receipt.size,
            sha256=receipt.sha256,
            tool=TOOL_NAME,
            tool_version=__version__,
            created_utc=utc_now(),
        )
        return render_card(
            provenance,
            licence,
            sidecar_repo=plan.sidecar_repo,
            endpoint=self.endpoint,
            filename=plan.filename,
        )

    def _collection(self, api: HfApi) -> str:
        if not collection_enabled(self.options.file_in_collection):
            self.ctx.log(f"not filing into {COLLECTION_TITLE!r} (turned off)")
            return ""
        owner = self.plan.sidecar_repo.split("/", 1)[0]
        self.ctx.emit(StageEvent("collection", f"{owner}/{COLLECTION_TITLE}"))
        try:
            url = file_into_collection(api, owner, self.plan.sidecar_repo)
        except Exception as exc:
            reason = hub_error(exc, f"filing into {owner}'s {COLLECTION_TITLE!r}", self.endpoint)
            self._warn(f"{reason}; the sidecar is published — run the publish again to retry")
            return ""
        self.ctx.log(f"filed in {url}")
        return url

    # -- reporting -------------------------------------------------------------------------

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        self.ctx.log(message, "warning")

    def _finish(self, result: PublishResult) -> PublishResult:
        final = PublishResult(
            **{
                **asdict(result),
                "seconds_total": time.perf_counter() - self.started,
                "warnings": tuple(self.warnings),
            }
        )
        self.ctx.emit(ResultEvent(final.to_json()))
        return final

    def _kept_in_scratch(self, exc: BaseException, doing: str) -> MtpStudioError:
        """The error to raise for a failure after extraction: it says where the sidecar is."""
        kept = (
            f"the extracted sidecar is kept at {self.output}; run the same publish again to "
            "upload it (it is reused, not extracted again), or remove it with "
            f"`mtp-studio scratch clean --scratch {self.output.parent}`"
        )
        chain = list(_causes(exc))
        if any(isinstance(e, JobCancelled) for e in chain):
            return JobCancelled(f"publish cancelled while {doing}; {kept}")
        readable = next((e for e in chain if isinstance(e, MtpStudioError)), None)
        if readable is not None:
            return PublishError(f"{readable}; {kept}")
        network = next(
            (e for e in chain if isinstance(e, (HfHubHTTPError, httpx2.TransportError))), exc
        )
        return PublishError(f"{hub_error(network, doing, self.endpoint)}; {kept}")


def _causes(exc: BaseException | None) -> list[BaseException]:
    """``exc`` and its causes, outermost first (the client wraps upload errors in RuntimeError)."""
    chain: list[BaseException] = []
    while exc is not None and exc not in chain:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    return chain
