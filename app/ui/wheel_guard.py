"""The mouse wheel scrolls the page, never a value the pointer happens to pass over.

Spin boxes, combo boxes and sliders take the wheel by default, focused or not, so scrolling the
chat's settings panel turned Draft depth from auto to 3 and scrolling past the model picker could
load another model. With the guard, such a widget takes the wheel only while it has the keyboard
focus (click it or Tab to it first); otherwise the turn goes to the scroll area under it, as in
browsers and most desktop apps. One event filter on the application covers every window and
dialog, including those opened later.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import (
    QAbstractScrollArea,
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
    """Hands a wheel turn over an unfocused value widget to the scroll area around it.

    It sees every event of the application, so it does as little as it can for the others: an
    ``isinstance`` check (reading ``event.type()`` cost three times as much, about 0.25 s over
    the 40,000 events of a theme switch). The turn is sent to the scroll area itself rather than
    left to Qt's propagation, which Qt does for the window system's events only."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if not isinstance(event, QWheelEvent) or not takes_wheel_only_with_focus(watched):
            return False
        assert isinstance(watched, QWidget)
        if watched.hasFocus():
            return False
        if watched.focusPolicy() == Qt.FocusPolicy.WheelFocus:
            watched.setFocusPolicy(Qt.FocusPolicy.StrongFocus)  # no focus from the wheel either
        area = _scroll_area_around(watched)
        if area is not None:
            viewport = area.viewport()
            at = QPointF(watched.mapTo(viewport, event.position().toPoint()))
            QApplication.sendEvent(
                viewport,
                QWheelEvent(
                    at,
                    event.globalPosition(),
                    event.pixelDelta(),
                    event.angleDelta(),
                    event.buttons(),
                    event.modifiers(),
                    event.phase(),
                    event.inverted(),
                ),
            )
        return True


def _scroll_area_around(widget: QWidget) -> QAbstractScrollArea | None:
    """The nearest scroll area ``widget`` sits in (inside its viewport), if any."""
    node = widget.parentWidget()
    while node is not None:
        if isinstance(node, QAbstractScrollArea) and node.viewport().isAncestorOf(widget):
            return node
        node = node.parentWidget()
    return None


def install_wheel_guard(app: QApplication) -> WheelGuard:
    """Install the guard on ``app`` once; later calls return the same guard."""
    for child in app.children():
        if isinstance(child, WheelGuard):
            return child
    guard = WheelGuard(app)
    app.installEventFilter(guard)
    return guard
