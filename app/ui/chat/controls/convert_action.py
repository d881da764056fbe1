"""The chat's "Convert for MLX…" action: an FP8 checkpoint mlx-lm refused, made loadable.

mlx-lm cannot load FP8 checkpoints. The banner that says so offers this action: it asks which
copy to write (BF16, exact; or quantised for MLX at 4 or 8 bits, smaller and faster, with the
MTP head kept beside it); the rest — a recorded job, its progress, the finished folder the chat
opens — is the shared :class:`~app.ui.chat.controls.job_action.JobAction`.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QMessageBox

from app.engine.convert.fp8_check import model_name
from app.engine.convert.job import ConvertRequest, default_output_folder
from app.ui.chat.controls.job_action import JobAction, Wording

CHOICES: tuple[tuple[str, int | None, str], ...] = (
    ("MLX 4-bit", 4, "about a quarter of BF16's size; fastest"),
    ("MLX 8-bit", 8, "about half of BF16's size; closest to the original"),
    ("BF16", None, "exact dequantisation, twice the FP8 size"),
)


class ConvertAction(JobAction):
    """Signals: ``started``, ``progress(percent)``, ``succeeded(folder)``, ``failed(message)``."""

    wording = Wording("The conversion was cancelled; nothing was written.", "The conversion failed")

    def ask(self, source: Path) -> QMessageBox | None:
        """Ask which copy of the FP8 checkpoint ``source`` to write (nothing written yet)."""
        if self.running:
            return None
        box = self._question(
            "Convert for MLX",
            f"Write a copy of {model_name(source)} that mlx-lm can load?",
            QMessageBox.StandardButton.Cancel,
        )
        lines = ["The FP8 weights are dequantised to BF16 exactly; the original stays as it is."]
        for label, bits, why in CHOICES:
            out = default_output_folder(source, bits, self._out_dir)
            self.start_on_click(
                box.addButton(label, QMessageBox.ButtonRole.AcceptRole),
                ConvertRequest(source, out, bits),
            )
            lines.append(f"• {label} ({out.name}): {why}")
        lines.append(f"Written into {out.parent}; progress on the Jobs page.")
        box.setInformativeText("\n".join(lines))
        box.open()
        return box
