"""The mouse wheel scrolls the page, never a value the pointer happens to pass over.

Spin boxes, combo boxes and sliders take the wheel by default, focused or not, so scrolling the
chat's settings panel turned Draft depth from auto to 3 and scrolling past the model picker could
load another model. With the guard, such a widget takes the wheel only while it has the keyboard
focus (click it or Tab to it first); otherwise the turn goes to the scroll area under it, as in
browsers and most desktop apps. One event filter on the application covers every window and
dialog, including those opened later.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import (
    QAbstractSlider,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QScrollBar,
    QWidget,
)

GUARDED = (QAbstractSpinBox, QComboBox, QAbstractSlider)


def takes_wheel_only_with_focus(widget: QObject) -> bool:
    """Whether ``widget`` is a value widget the guard keeps from the unfocused wheel."""
    return isinstance(widget, GUARDED) and not isinstance(widget, QScrollBar)


class WheelGuard(QObject):
    """Passes a wheel turn over an unfocused value widget on to its parent.

    It sees every event of the application, so it does as little as it can for the others: an
    ``isinstance`` check (reading ``event.type()`` cost three times as much, about 0.25 s over
    the 40,000 events of a theme switch)."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if isinstance(event, QWheelEvent) and takes_wheel_only_with_focus(watched):
            assert isinstance(watched, QWidget)
            if not watched.hasFocus():
                if watched.focusPolicy() == Qt.FocusPolicy.WheelFocus:
                    watched.setFocusPolicy(Qt.FocusPolicy.StrongFocus)  # no focus from the wheel
                event.ignore()  # ignored and filtered: Qt offers the turn to the parent
                return True
        return False


def install_wheel_guard(app: QApplication) -> WheelGuard:
    """Install the guard on ``app`` once; later calls return the same guard."""
    for child in app.children():
        if isinstance(child, WheelGuard):
            return child
    guard = WheelGuard(app)
    app.installEventFilter(guard)
    return guard
