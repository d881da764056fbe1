"""The "Add the MTP head from <sidecar>" action, from the click to the loaded copy.

llama.cpp drafts only with a head inside the GGUF; a downloaded GGUF paired with a sidecar can
get one by grafting. The action checks the pair in the background (nothing written) and asks
before writing a copy of the model; the rest — a recorded job, its progress, the finished file
the window selects and loads — is the shared :class:`~app.ui.chat.controls.job_action.JobAction`.
"""

from __future__ import annotations

from PySide6.QtWidgets import QMessageBox

from app.engine.chat.model_files import ModelDescription
from app.engine.graft import GraftCheck, check_graft
from app.engine.graft.job import GraftRequest, default_output_path
from app.engine.units import format_bytes
from app.ui.background import run_in_background
from app.ui.chat.controls.job_action import JobAction, Wording
from app.ui.errors import readable


class GraftAction(JobAction):
    """Signals: ``started``, ``progress(percent)``, ``succeeded(path)``, ``failed(message)``."""

    wording = Wording(
        "Adding the MTP head was cancelled; no file was written.", "Adding the MTP head failed"
    )

    def ask(self, model: ModelDescription) -> None:
        """Check ``model`` + its sidecar off the GUI thread, then ask before writing."""
        if self.running or model.sidecar is None:
            return
        base, sidecar = model.path, model.sidecar
        run_in_background(
            lambda: check_graft(base, sidecar),
            lambda check: self._confirm(model, check),
            lambda exc: self.failed.emit(f"Cannot add the MTP head: {readable(exc)}"),
        )

    def _confirm(self, model: ModelDescription, check: GraftCheck) -> None:
        if check.problem is not None or check.plan is None or model.sidecar is None:
            self.failed.emit(
                f"The MTP head of {model.sidecar} does not fit {model.name}: {check.problem}"
            )
            return
        plan = check.plan
        out = default_output_path(model.path, self._out_dir)
        replaces = " (replacing the file there)" if out.exists() else ""
        box = self._question(
            "Add the MTP head",
            f"Write a copy of {model.name} with the MTP head of {model.sidecar.name} added?",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
        )
        box.setInformativeText(
            f"{plan.architecture}: {plan.trunk_blocks} blocks + {plan.head_blocks} MTP block(s), "
            f"head {format_bytes(plan.head_bytes)} as {plan.head_type}.\n"
            f"New file: {out}{replaces}, about {format_bytes(plan.estimated_bytes)}.\n"
            "The original stays as it is."
        )
        box.button(QMessageBox.StandardButton.Yes).setText("Add the head")
        request = GraftRequest(model.path, model.sidecar, out)
        box.accepted.connect(lambda: self.start(request))
        box.open()
