"""What the chat's replies go to — a local model in the inference worker, or a remote server —
and how far it is from answering.

Choosing a local model (:mod:`app.ui.chat.controls.model_choice`) and choosing a server
(:mod:`app.ui.chat.controls.remote_connections`) both switch this one target, and the replies
(:mod:`app.ui.chat.controls.reply_control`) only read it, so a local model and a server can never
both be the one that answers, and the model bar's load state always describes the one that does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from app.engine.chat.connections import Connection
from app.engine.chat.model_files import ModelDescription
from app.engine.runtime.core.backend import ModelInfo
from app.ui.chat.widgets.model_bar import ModelBar
from app.ui.wording import in_window_words

LoadState = Literal["none", "loading", "ready", "failed"]
"""Loading covers a server being checked; failed, a load or a check that failed."""


class ReplyTarget:
    """The model (``model`` and, once loaded, ``info``) or server (``remote`` and the model it
    serves, ``remote_model``) that answers, and its :data:`LoadState`."""

    def __init__(self) -> None:
        self.model: ModelDescription | None = None
        self.info: ModelInfo | None = None
        self.remote: Connection | None = None
        self.remote_model = ""
        self.state: LoadState = "none"

    def use_local(self, model: ModelDescription) -> None:
        """``model`` is being loaded in the worker; no server answers any more."""
        self.model, self.info, self.remote, self.state = model, None, None, "loading"

    def use_remote(self, connection: Connection) -> None:
        """``connection``'s server is being checked; no local model answers any more."""
        self.remote, self.model, self.info, self.state = connection, None, None, "loading"

    def unload(self) -> None:
        """The local model is being unloaded: it stays chosen, but nothing answers."""
        self.info, self.state = None, "none"

    @property
    def loaded_model(self) -> Path | None:
        """The local model loading or loaded in the worker, if any."""
        if self.model is not None and self.state in ("loading", "ready"):
            return self.model.path
        return None

    @property
    def can_answer(self) -> bool:
        """A model or server is chosen, and it has not failed."""
        chosen = self.model is not None or self.remote is not None
        return chosen and self.state not in ("none", "failed")

    def pictures_refused(self) -> str | None:
        """Why the loaded local model reads no pictures, in one line; None when it reads them,
        while it loads (the load says), and for a server (the server says, as a reply's error)."""
        info = self.info
        if self.remote is not None or info is None or info.reads_images:
            return None
        reason = info.images_unavailable_reason or f"{info.path.name} reads no pictures"
        return in_window_words(reason)

    def reply_model_name(self) -> str:
        """The name a reply is shown and stored under."""
        if self.remote is not None:
            model = self.remote_model or self.remote.model or "server model"
            return f"{model} (remote: {self.remote.name})"
        assert self.model is not None
        return self.model.name

    def show_state(self, bar: ModelBar) -> None:
        """Show on ``bar`` how far the target is: connecting, loading, ready or failed."""
        if self.remote is not None:
            name = self.remote.name
            if self.state == "ready":
                bar.set_load_state(f"Ready: {self.remote_model} on {name}")
            elif self.state == "failed":
                bar.set_load_state(f"Could not connect to {name}", error=True)
            else:
                bar.set_load_state(f"Connecting to {name}…", busy=True)
        elif self.state == "loading" and self.model is not None:
            bar.set_load_state(f"Loading {self.model.name}…", busy=True)
        elif self.state == "ready" and self.info is not None:
            bar.set_load_state(f"Ready: {self.info.path.name}")
        elif self.state == "failed":
            bar.set_load_state("Could not load the model", error=True)
        elif self.model is not None:
            bar.set_load_state(f"{self.model.name} is not loaded: choose it again to load it")
        else:
            bar.set_load_state("No model loaded")
