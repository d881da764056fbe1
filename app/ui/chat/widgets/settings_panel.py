"""The side panel of a conversation's settings: system prompt (with presets), sampling, what to
do when the context is full, MTP, chat template.

Every change is emitted as a whole :class:`ChatSettings` (saved with the conversation, used by
its next reply). The MTP switch and depth are limited by what the loaded model offers: without
a usable MTP head the switch is off and disabled, with the runtime's reason as its tooltip.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.chat.conversation import ChatSettings
from app.engine.runtime.core.request import MAX_DRAFT_DEPTH
from app.engine.runtime.sampling.acceptance import AcceptMode
from app.engine.runtime.speculative.depth_policy import AUTO
from app.ui.wording import in_window_words

RANDOM_SEED = -1
AUTO_DEPTH_VALUE = 0  # the depth box's lowest value reads "auto": the adaptive depth
ACCEPT_LABELS = {
    AcceptMode.LEVIATHAN_CHEN.value: "Leviathan–Chen",
    AcceptMode.MATCH.value: "Sample-and-compare",
}


class SettingsPanel(QWidget):
    """``changed(ChatSettings)`` on every edit; ``show_template_requested``; the preset row's
    ``preset_chosen(text)``, ``save_preset_requested(text)`` and ``delete_preset_requested(name)``
    (the presets live in the history, see :mod:`~app.ui.chat.controls.preset_control`)."""

    changed = Signal(object)
    show_template_requested = Signal()
    preset_chosen = Signal(str)
    save_preset_requested = Signal(str)
    delete_preset_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._updating = False
        self._mtp_reason: str | None = None
        self._mtp_wanted = True
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addLayout(self._build_presets())
        layout.addWidget(self.presets)
        layout.addWidget(self._build_system_prompt())
        layout.addWidget(self._build_sampling())
        layout.addWidget(self._build_mtp())
        layout.addWidget(self._build_template())
        layout.addStretch(1)
        self._connect()
        self.set_settings(ChatSettings())

    def _build_presets(self) -> QHBoxLayout:
        self.presets = QComboBox()
        self.presets.setObjectName("promptPresets")
        self.presets.setPlaceholderText("Presets…")
        self.presets.setToolTip("Start from a saved system prompt")
        self.presets.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.presets.setMinimumContentsLength(10)
        self.presets.activated.connect(self._on_preset)
        self.save_preset_button = QToolButton()
        self.save_preset_button.setText("Save…")
        self.save_preset_button.setToolTip("Save this system prompt as a preset")
        self.save_preset_button.clicked.connect(
            lambda: self.save_preset_requested.emit(self.system_prompt.toPlainText().strip())
        )
        self.delete_preset_button = QToolButton()
        self.delete_preset_button.setText("Delete")
        self.delete_preset_button.setToolTip("Delete the chosen preset (yours only)")
        self.delete_preset_button.clicked.connect(self._delete_preset)
        row = QHBoxLayout()  # the heading with what it offers; the presets go under it
        row.setSpacing(2)
        row.addWidget(QLabel("<b>System prompt</b>"), 1)
        row.addWidget(self.save_preset_button)
        row.addWidget(self.delete_preset_button)
        return row

    def _build_system_prompt(self) -> QPlainTextEdit:
        self.system_prompt = QPlainTextEdit()
        self.system_prompt.setPlaceholderText("Optional: instructions for every reply")
        self.system_prompt.setMaximumHeight(90)
        self.system_prompt.setTabChangesFocus(True)
        return self.system_prompt

    def _build_sampling(self) -> QGroupBox:
        self.temperature = _double(0.0, 2.0, 0.05, "0 = greedy (always the most likely token)")
        self.top_p = _double(0.01, 1.0, 0.01, "1 = off")
        self.top_k = QSpinBox()
        self.top_k.setRange(0, 1000)
        self.top_k.setSpecialValueText("off")
        self.min_p = _double(0.0, 0.99, 0.01, "0 = off")
        self.seed = QSpinBox()
        self.seed.setRange(RANDOM_SEED, 2_147_483_647)
        self.seed.setSpecialValueText("random")
        self.seed.setToolTip("A fixed seed makes replies reproducible")
        self.max_tokens = QSpinBox()
        self.max_tokens.setRange(1, 32768)
        self.max_tokens.setSingleStep(64)
        self.drop_oldest = QCheckBox("Drop the oldest turns when full")
        self.drop_oldest.setToolTip(
            "When the conversation no longer fits the model's context, leave out its oldest "
            "turns (the reply says how many) instead of failing"
        )
        sampling = QGroupBox("Sampling")
        form = _form(sampling)
        form.addRow("Temperature", self.temperature)
        form.addRow("Top-p", self.top_p)
        form.addRow("Top-k", self.top_k)
        form.addRow("Min-p", self.min_p)
        form.addRow("Seed", self.seed)
        form.addRow("Max tokens", self.max_tokens)
        order = QLabel("Applied in order: temperature → top-k → top-p → min-p.")
        order.setWordWrap(True)
        order.setObjectName("muted")
        form.addRow(order)
        form.addRow(self.drop_oldest)
        return sampling

    def _build_mtp(self) -> QGroupBox:
        self.mtp_enabled = QCheckBox("Draft with the MTP head")
        self.mtp_depth = QSpinBox()
        self.mtp_depth.setRange(AUTO_DEPTH_VALUE, MAX_DRAFT_DEPTH)
        self.mtp_depth.setSpecialValueText("auto")
        self.mtp_depth.setToolTip(
            "Tokens drafted per cycle. auto (the default) picks 0–4 before each cycle from the "
            "measured acceptance and speed on this machine, and remembers it per model."
        )
        self.accept = QComboBox()
        self.accept.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.accept.setMinimumContentsLength(12)
        self.accept.setToolTip(
            "Both are exact. Leviathan–Chen accepts a draft with probability min(1, p/q) and "
            "accepts more often at temperature > 0; sample-and-compare is what llama.cpp and "
            "mlx-lm do."
        )
        for value, label in ACCEPT_LABELS.items():
            self.accept.addItem(label, value)
        mtp = QGroupBox("MTP")
        form = _form(mtp)
        form.addRow(self.mtp_enabled)
        form.addRow("Draft depth", self.mtp_depth)
        form.addRow("Acceptance", self.accept)
        self.mtp_status = QLabel()
        self.mtp_status.setWordWrap(True)
        self.mtp_status.setObjectName("muted")
        form.addRow(self.mtp_status)
        return mtp

    def _build_template(self) -> QGroupBox:
        self.template_label = QLabel("No model loaded")
        self.template_label.setWordWrap(True)
        self.template_button = QPushButton("View chat template…")
        self.template_button.clicked.connect(self.show_template_requested.emit)
        template = QGroupBox("Chat template")
        template_layout = QVBoxLayout(template)
        template_layout.addWidget(self.template_label)
        template_layout.addWidget(self.template_button)
        return template

    def _connect(self) -> None:
        for spin in (self.temperature, self.top_p, self.min_p):
            spin.valueChanged.connect(self._emit)
        for box in (self.top_k, self.seed, self.max_tokens, self.mtp_depth):
            box.valueChanged.connect(self._emit)
        self.system_prompt.textChanged.connect(self._emit)
        self.mtp_enabled.toggled.connect(self._on_mtp_toggled)
        self.drop_oldest.toggled.connect(self._emit)
        self.accept.currentIndexChanged.connect(self._emit)

    # -- presets ------------------------------------------------------------------------------

    def set_presets(self, presets: list[tuple[str, str, bool]]) -> None:
        """``(name, text, deletable)`` of every preset, in the order to list them."""
        self.presets.blockSignals(True)
        self.presets.clear()
        for name, text, deletable in presets:
            self.presets.addItem(name, (text, deletable))
            self.presets.setItemData(self.presets.count() - 1, text, Qt.ItemDataRole.ToolTipRole)
        self.presets.setCurrentIndex(-1)
        self.presets.blockSignals(False)
        self.delete_preset_button.setEnabled(False)

    def _on_preset(self, index: int) -> None:
        text, deletable = self.presets.itemData(index)
        self.delete_preset_button.setEnabled(bool(deletable))
        self.system_prompt.setPlainText(text)
        self.preset_chosen.emit(text)

    def _delete_preset(self) -> None:
        index = self.presets.currentIndex()
        if index >= 0 and self.presets.itemData(index)[1]:
            self.delete_preset_requested.emit(self.presets.itemText(index))

    def settings(self) -> ChatSettings:
        seed = self.seed.value()
        return ChatSettings(
            system_prompt=self.system_prompt.toPlainText().strip(),
            temperature=round(self.temperature.value(), 4),
            top_p=round(self.top_p.value(), 4),
            top_k=self.top_k.value(),
            min_p=round(self.min_p.value(), 4),
            seed=None if seed == RANDOM_SEED else seed,
            max_tokens=self.max_tokens.value(),
            mtp_enabled=self._mtp_wanted,
            mtp_depth=self.mtp_depth.value() or AUTO,
            accept=str(self.accept.currentData()),
            drop_oldest_turns=self.drop_oldest.isChecked(),
        )

    def set_settings(self, settings: ChatSettings) -> None:
        self._updating = True
        try:
            if self.system_prompt.toPlainText() != settings.system_prompt:
                self.system_prompt.setPlainText(settings.system_prompt)
            self.temperature.setValue(settings.temperature)
            self.top_p.setValue(settings.top_p)
            self.top_k.setValue(settings.top_k)
            self.min_p.setValue(settings.min_p)
            self.seed.setValue(RANDOM_SEED if settings.seed is None else settings.seed)
            self.max_tokens.setValue(settings.max_tokens)
            self._mtp_wanted = settings.mtp_enabled
            self.mtp_enabled.setChecked(settings.mtp_enabled and self._mtp_reason is None)
            depth = settings.mtp_depth
            self.mtp_depth.setValue(AUTO_DEPTH_VALUE if depth == AUTO else int(depth))
            self.accept.setCurrentIndex(max(self.accept.findData(settings.accept), 0))
            self.drop_oldest.setChecked(settings.drop_oldest_turns)
        finally:
            self._updating = False
        self._update_mtp_widgets()

    def use_depth(self, depth: int) -> None:
        """MTP on at a fixed ``depth`` (as if the user chose it; the conversation keeps it)."""
        self.mtp_enabled.setChecked(True)
        self.mtp_depth.setValue(depth)

    def set_model_capabilities(
        self, max_depth: int, mtp_reason: str | None, template: str | None
    ) -> None:
        """What the loaded model offers: its draft depth limit, why MTP is off, its template."""
        self._mtp_reason = in_window_words(mtp_reason) if mtp_reason is not None else None
        self._updating = True
        try:
            if max_depth >= 1:  # a model without MTP keeps the chosen depth for the next one
                self.mtp_depth.setMaximum(max_depth)
            self.mtp_enabled.setChecked(self._mtp_wanted and mtp_reason is None)
        finally:
            self._updating = False
        self.template_label.setText(
            "The model's own template formats the conversation."
            if template
            else "This model ships no chat template: messages are joined as plain text."
        )
        self.template_button.setEnabled(bool(template))
        self._update_mtp_widgets()

    def _update_mtp_widgets(self) -> None:
        available = self._mtp_reason is None
        self.mtp_enabled.setEnabled(available)
        self.mtp_enabled.setToolTip(self._mtp_reason or "")
        on = available and self.mtp_enabled.isChecked()
        self.mtp_depth.setEnabled(on)
        self.accept.setEnabled(on)
        if not available:
            self.mtp_status.setText(f"MTP is off: {self._mtp_reason}")
        elif on:
            depth = self.mtp_depth.value()
            drafting = (
                "Drafting 0–4 tokens per cycle, whichever is fastest here."
                if depth == AUTO_DEPTH_VALUE
                else f"Drafting {depth} token(s) per cycle."
            )
            self.mtp_status.setText(
                f"{drafting} Output follows exactly the distribution of plain decoding "
                "(identical at temperature 0)."
            )
        else:
            self.mtp_status.setText("Plain decoding: one token per forward pass.")

    def _on_mtp_toggled(self, checked: bool) -> None:
        if not self._updating:
            self._mtp_wanted = checked
        self._emit()

    def _emit(self) -> None:
        self._update_mtp_widgets()
        if not self._updating:
            self.changed.emit(self.settings())


def _form(box: QGroupBox) -> QFormLayout:
    """A form whose labels go above their fields when the panel is narrow."""
    form = QFormLayout(box)
    form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
    return form


def _double(low: float, high: float, step: float, tip: str) -> QDoubleSpinBox:
    spin = QDoubleSpinBox()
    spin.setRange(low, high)
    spin.setSingleStep(step)
    spin.setDecimals(2)
    spin.setToolTip(tip)
    return spin
