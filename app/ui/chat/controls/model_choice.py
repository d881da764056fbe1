"""Choosing the local model the chat talks to: finding the models on disk, opening a GGUF file
or a model folder, loading the chosen one in the worker, and saying how far the load got.

Discovery runs in a background thread and loading in the runtime's worker process (through the
:class:`RuntimeBridge`), so choosing never blocks the window. When a scan ends, the preferred
model loads: a catalog entry the user asked to chat with, else the model used last, else the
first that runs. A model that cannot run says why in the banner and leaves the loaded one in
place; a load failure is shown as the runtime's readable message, in one line with its details
folded away. A model grafted from the model bar ("Add the MTP head") is opened once its job
succeeds. An FP8 checkpoint, which mlx-lm cannot load, gets a way forward in the banner: convert
it here (a job; the copy opens when it is done), or find a converted repo on the Hub. The vision
projector a GGUF model reads pictures with is chosen in the model bar
(:mod:`~app.ui.chat.controls.projector_choice`); another choice loads the model again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QFileDialog, QWidget

from app.engine.chat.context_choice import load_settings_for
from app.engine.chat.discovery import (
    ModelSources,
    default_model_roots,
    discover_models,
    with_drafter,
    with_sidecar,
)
from app.engine.chat.history import HistoryStore
from app.engine.chat.model_files import DEMO, ModelDescription, describe_model
from app.engine.convert.fp8_check import is_fp8_refusal, model_name
from app.engine.runtime.backends.choice import MLX
from app.engine.runtime.core.backend import LoadSettings, ModelInfo
from app.engine.runtime.core.demo_model import DEMO_MODEL_FILENAME
from app.engine.settings import AppDirs, Settings, hf_hub_cache
from app.ui.background import run_in_background
from app.ui.chat.bridges.reply_target import ReplyTarget
from app.ui.chat.bridges.runtime_bridge import RuntimeBridge
from app.ui.chat.controls.convert_action import ConvertAction
from app.ui.chat.controls.graft_action import GraftAction
from app.ui.chat.controls.projector_choice import ProjectorChoice
from app.ui.chat.controls.remote_controls import RemoteControls
from app.ui.chat.controls.worker_memory import WorkerMemory
from app.ui.chat.transcript.column import TranscriptView
from app.ui.chat.widgets.banner import Banner
from app.ui.chat.widgets.model_bar import ModelBar
from app.ui.chat.widgets.settings_panel import SettingsPanel
from app.ui.errors import readable

LAST_MODEL = "last_model"
"""The history store's preference naming the model used last (loaded first next time)."""


class ModelChoice(QObject):
    """Finds, opens and loads local models for the chat window (``parent``)."""

    def __init__(
        self,
        parent: QWidget,
        *,
        dirs: AppDirs,
        settings: Settings,
        demo_dir: Path,
        store: HistoryStore,
        bridge: RuntimeBridge,
        target: ReplyTarget,
        bar: ModelBar,
        banner: Banner,
        transcript: TranscriptView,
        panel: SettingsPanel,
        remote_controls: RemoteControls,
        graft: GraftAction,
        convert: ConvertAction,
        is_closed: Callable[[], bool],
    ) -> None:
        super().__init__(parent)
        self._parent = parent
        self._dirs = dirs
        self._app_settings = settings
        self._demo_dir = demo_dir
        self._store = store
        self._bridge = bridge
        self._target = target
        self._bar = bar
        self._banner = banner
        self._transcript = transcript
        self._panel = panel
        self._remote_controls = remote_controls
        self._is_closed = is_closed
        self._convert = convert
        self._catalog_sidecars: dict[str, str] = {}
        self._loaded_with: LoadSettings | None = None
        self._wanted_repo: str | None = None
        self.memory = WorkerMemory(lambda: bridge.worker_pid, bar.set_memory_in_use, self)
        self.projectors = ProjectorChoice(parent, store, bar.projector_row)
        self.projectors.changed.connect(self._reload)
        bar.set_load_options(settings.load_options)
        self._connect(bar, graft, convert, bridge)

    def _connect(
        self, bar: ModelBar, graft: GraftAction, convert: ConvertAction, bridge: RuntimeBridge
    ) -> None:
        bar.model_chosen.connect(self.choose_model)
        bar.unload_requested.connect(self.unload)
        bar.open_file_requested.connect(self._ask_model_file)
        bar.open_folder_requested.connect(self._ask_model_folder)
        bar.refresh_requested.connect(self.rescan_models)
        bar.graft_requested.connect(graft.ask)
        bar.graft_cancel_requested.connect(graft.cancel)
        graft.started.connect(lambda: bar.set_grafting(True))
        graft.progress.connect(bar.set_graft_progress)
        graft.succeeded.connect(self._on_grafted)
        graft.failed.connect(self._on_graft_failed)
        convert.started.connect(self._on_convert_started)
        convert.progress.connect(self._on_convert_progress)
        convert.succeeded.connect(self._on_converted)
        convert.failed.connect(self._on_convert_failed)
        bridge.loading.connect(self._on_loading)
        bridge.loaded.connect(self._on_loaded)
        bridge.load_failed.connect(self._on_load_failed)
        bridge.unloaded.connect(self._on_unloaded)

    # -- finding models -----------------------------------------------------------------------

    def model_sources(self) -> ModelSources:
        """Where to look for models, with the models folder of the settings applied last."""
        roots = (
            *default_model_roots(self._app_settings.models_path(), hf_hub_cache()),
            self._dirs.grafted_models,
        )
        return ModelSources(
            model_roots=roots,
            opened=tuple(self._store.opened_models()),
            demo_dir=self._demo_dir,
            catalog_sidecars=dict(self._catalog_sidecars),
        )

    def rescan_models(self) -> None:
        """Look for models in the background; the picker fills when the scan ends."""
        sources = self.model_sources()
        self._bar.set_load_state("Looking for models…", busy=self._target.state != "loading")
        run_in_background(
            lambda: discover_models(sources), self._on_models_found, self._on_scan_failed
        )

    def _on_models_found(self, models: list[ModelDescription]) -> None:
        if self._is_closed():
            return
        current = self._target.model
        if current is not None and all(m.path != current.path for m in models):
            models = [*models, current]
        remote = self._target.remote
        selected = None if remote is not None else current or self._preferred_model(models)
        self._bar.set_models(models, selected)
        self._target.show_state(self._bar)
        nothing_chosen = self._target.remote is None and self._target.model is None
        wanted = selected is not None and selected.repo_id == self._wanted_repo
        if nothing_chosen and selected and (selected.runnable or wanted):
            self.choose_model(selected)  # a wanted model that cannot run says why

    def _on_scan_failed(self, exc: BaseException) -> None:
        if not self._is_closed():
            self._target.show_state(self._bar)
            self._banner.show_text(f"Looking for models failed: {readable(exc)}")

    def _preferred_model(self, models: list[ModelDescription]) -> ModelDescription | None:
        if self._wanted_repo is not None:
            wanted = [model for model in models if model.repo_id == self._wanted_repo]
            if wanted:
                return next((model for model in wanted if model.runnable), wanted[0])
        last = self._store.preference(LAST_MODEL)
        runnable = [model for model in models if model.runnable]
        for model in runnable:
            if str(model.path) == last:
                return model
        return runnable[0] if runnable else None

    # -- choosing -----------------------------------------------------------------------------

    def open_model(self, path: Path) -> ModelDescription:
        """Describe, remember and load the GGUF file or model folder at ``path``."""
        sources = self.model_sources()
        description = with_drafter(with_sidecar(describe_model(Path(path)), sources), sources)
        if description.problem is None:
            self._store.remember_model(description.path)
        models = [m for m in self._bar.models if m.path != description.path]
        self._bar.set_models([*models, description], description)
        self.choose_model(description)
        return description

    def choose_model(self, model: ModelDescription) -> None:
        """Load ``model`` in the worker (unless it cannot run: then say why)."""
        self._bar.show_details(model)
        if not model.runnable:
            self.show_problem(model.problem or model.runnable_reason or "", model.path)
            if self._target.loaded_model is not None:
                self._bar.set_models(self._bar.models, self._target.model)  # keep it
            else:
                self._bar.set_load_state(f"Cannot load {model.repo_id or model.name}", error=True)
            return
        settings = self.projectors.apply(model, load_settings_for(model, self._app_settings))
        if self._target.loaded_model == model.path and self._loaded_with == settings:
            return
        self.projectors.show_loading(model)
        self._loaded_with = settings
        self._target.use_local(model)
        self._remote_controls.use_local()
        self._store.set_preference(LAST_MODEL, str(model.path))
        self._banner.hide()
        sidecar = model.sidecar if model.backend is not None and model.backend.name == MLX else None
        self._bridge.load(model.path, settings, sidecar)

    def _reload(self) -> None:
        """Load the chosen model again (its projector changed), if it is the one in use."""
        model = self._target.model
        if model is not None and self._target.remote is None:
            self.choose_model(model)

    def unload(self) -> None:
        """Stop the worker: its memory goes back; choosing a model (or this one) loads again."""
        if self._target.loaded_model is None:
            return
        self._target.unload()
        self._loaded_with = None
        self._bar.set_load_state("Unloading…", busy=True)
        self._bar.set_unloadable(False)
        self._bridge.unload()

    def _on_unloaded(self) -> None:
        self.memory.follow(False)
        if not self._is_closed() and self._target.remote is None:
            self._target.show_state(self._bar)

    def apply_settings(self, settings: Settings) -> bool:
        """Settings were saved: the model bar estimates memory for the new load options, and a
        loaded local model is loaded again with them (the next reply uses them). True when the
        models folder moved (the caller looks for models again)."""
        changed = settings.load_options != self._app_settings.load_options
        moved = settings.models_path() != self._app_settings.models_path()
        self._app_settings = settings
        self._bar.set_load_options(settings.load_options)
        model = self._target.model
        if changed and self._target.loaded_model is not None and model is not None:
            self.choose_model(model)
        return moved

    def want_repo(self, repo_id: str, sidecar_repo: str | None = None) -> None:
        """Prefer the downloaded model of ``repo_id`` (a catalog entry, whose MTP sidecar is
        ``sidecar_repo``) from now on, in every scan."""
        self._wanted_repo = repo_id
        if sidecar_repo:
            self._catalog_sidecars[repo_id] = sidecar_repo

    def choose_repo(self, repo_id: str) -> None:
        """Load the downloaded model of ``repo_id``, or say it is missing and look again."""
        matches = [m for m in self._bar.models if m.repo_id == repo_id]
        match = next((m for m in matches if m.runnable), matches[0] if matches else None)
        if match is not None:  # one that cannot run says why (an FP8 release: convert it)
            self._bar.set_models(self._bar.models, match)
            self.choose_model(match)
        else:
            self._banner.show_text(
                f"{repo_id} is not downloaded yet (looked in {self._app_settings.models_path()} "
                "and the Hugging Face cache). Download it from the main window (Download model…), "
                "or open a GGUF file here."
            )
            self.rescan_models()

    def use_demo_model(self) -> None:
        """Load the bundled demo model (what "Chat with the demo model" means), shown as the
        picker's choice."""
        demo = self._demo_dir / DEMO_MODEL_FILENAME
        self._wanted_repo = None
        description = with_sidecar(describe_model(demo, DEMO), self.model_sources())
        models = self._bar.models
        paths = [model.path for model in models]
        if description.path in paths:
            models[paths.index(description.path)] = description
        else:
            models.insert(0, description)
        self._bar.set_models(models, description)
        self.choose_model(description)

    def _ask_model_file(self) -> None:
        dialog = QFileDialog(
            self._parent, "Open a GGUF model", "", "GGUF models (*.gguf);;All files (*)"
        )
        dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        dialog.fileSelected.connect(lambda path: self.open_model(Path(path)))
        dialog.open()

    def _ask_model_folder(self) -> None:
        dialog = QFileDialog(self._parent, "Open a Hugging Face model folder")
        dialog.setFileMode(QFileDialog.FileMode.Directory)
        dialog.setOption(QFileDialog.Option.ShowDirsOnly)
        dialog.fileSelected.connect(lambda path: self.open_model(Path(path)))
        dialog.open()

    def _on_grafted(self, path: Path) -> None:
        self._bar.set_grafting(False)
        if not self._is_closed():
            self.open_model(path)

    def _on_graft_failed(self, message: str) -> None:
        self._bar.set_grafting(False)
        if not self._is_closed():
            self._banner.show_text(message)

    # -- loading (the worker's answers) -------------------------------------------------------

    def _on_loading(self, path: Path) -> None:
        if self._target.remote is not None:
            return
        self._target.state = "loading"
        self._bar.set_load_state(f"Loading {Path(path).name}…", busy=True)
        self._bar.set_unloadable(True)
        self._transcript.prepare_code_highlighting()

    def _on_loaded(self, info: ModelInfo) -> None:
        if self._is_closed() or self._target.remote is not None:
            return
        model = self._target.model
        self._target.info = info
        self._target.state = "ready"
        self._transcript.set_speed_model(model.name if model else "", info.path, info.backend)
        self._bar.set_load_state(f"Ready: {info.path.name}")
        self.projectors.show_loaded(model, info)
        self.memory.follow(True)
        template = model.chat_template if model is not None else None
        self._panel.set_model_capabilities(
            info.max_draft_depth, info.mtp_unavailable_reason, template
        )

    def _on_load_failed(self, message: str) -> None:
        if self._is_closed() or self._target.remote is not None:
            return
        self._target.state = "failed"
        model = self._target.model
        name = model.name if model is not None else "the model"
        self._bar.set_load_state(f"Could not load {name}", error=True)
        self._bar.set_unloadable(False)
        self.memory.follow(False)
        self.projectors.show_loaded(model, None)
        self.show_problem(message, model.path if model is not None else None)

    # -- a way forward ------------------------------------------------------------------------

    def show_problem(self, message: str, path: Path | None) -> None:
        """Say ``message`` in the banner; for an FP8 checkpoint, offer to convert it (or, as a
        hint, to find a converted repo on the Hub). The same message already shown (a second
        scan chose the same model), or an FP8 refusal while a conversion runs, leaves the
        banner as it is, with its buttons."""
        converting = self._convert.running and is_fp8_refusal(message)
        if converting or (self._banner.isVisible() and self._banner.text() == message):
            return  # the banner says the conversion is under way, or this already
        self._banner.show_text(message)
        if path is None or not is_fp8_refusal(message) or not Path(path).is_dir():
            return
        button = self._banner.add_action(
            "Convert for MLX…",
            lambda: self._convert.ask(Path(path)),
            "Write a copy mlx-lm can load: BF16 (exact), or quantised to 4 or 8 bits with the "
            "MTP head kept beside it — a job with progress on the Jobs page",
        )
        button.setObjectName("convertButton")
        self._banner.set_hint(
            f"Or search the Hub for a BF16 or MLX conversion of {model_name(Path(path))} and "
            "download that instead."
        )

    def _on_convert_started(self) -> None:
        self._banner.show_text(
            "Converting for MLX: progress and cancel on the Jobs page; the converted copy opens "
            "here when it is done."
        )
        self._banner.add_action("Cancel converting", self._convert.cancel)
        self._bar.set_load_state("Converting…", busy=True)

    def _on_convert_progress(self, percent: int) -> None:
        if not self._is_closed():
            self._bar.set_load_state(f"Converting… {percent} %", busy=True)

    def _on_converted(self, path: Path) -> None:
        if not self._is_closed():
            self._banner.hide()
            self.open_model(path)

    def _on_convert_failed(self, message: str) -> None:
        if not self._is_closed():
            self._bar.set_load_state("Conversion stopped", error=True)
            self._banner.show_text(message)
