"""The app's look: a light and a dark scheme on Qt's Fusion style, and one stylesheet.

Why a package of its own: every page shares one look, so pages only say what a widget *is* and
never carry colours or paddings of their own. Start it once, after the QApplication exists::

    themes = ThemeManager(app, settings.theme)      # applies it; follows the OS under "system"
    themes.set_choice("dark")                       # the toggle; save the choice in Settings.theme
    themes.changed.connect(widget.refresh_colours)  # "light"/"dark", after the new palette is set

Icons (:func:`app.ui.icons.icon`) set on buttons, actions, tabs and list items re-tint by
themselves; a pixmap a widget keeps (``QLabel.setPixmap(icon(...).pixmap(...))``) does not and
must be set again on ``changed``. Code highlighting and anything else painted with its own
colours should listen to ``changed`` and read ``QApplication.palette()`` (or
``SCHEMES[scheme]`` for the status tones).

Style hooks the pages use (set with ``setObjectName`` or ``setProperty``):

``QListWidget#sidebar``
    The page list at the left: items with icon (20 px) and text, rounded, the selected one
    filled with the accent. Give it a fixed width (about 200 px) and ``setIconSize(20, 20)``.
``QFrame#card``
    A rounded panel on the base colour with a 1 px border; put a layout with margins of 16–20 px
    inside.
``QLabel#pageTitle`` / ``QLabel#pageSubtitle``
    A page's heading (1.7× the base font, semi-bold) and the line under it (muted).
``QLabel#sectionTitle``
    A heading inside a page or card (1.2×, semi-bold).
``QPushButton[primary="true"]``
    The one main action of a page or dialog, filled with the accent. Its icon should use
    ``icon(name, QPalette.ColorRole.HighlightedText)`` so it shows white on the accent.
``QLabel#badge``
    A small accent pill, e.g. "MTP ×1.8 faster".
``QLabel#muted``
    Secondary text (placeholder colour, still 4.5:1 on the window and base colours).
``QLabel[tone="error"]``, ``[tone="success"]``, ``[tone="warning"]``
    Status text in a colour readable in both schemes (instead of a hard-coded ``#b00020``).
    Set the property before the label is shown, or call ``style().unpolish/polish`` after.
``QProgressBar`` with ``setTextVisible(False)``
    A thin 6 px bar; with text it is a 12 px rounded bar.

Everything else (inputs, buttons, tables, tabs, menus, scroll bars, tooltips) is styled without
hooks.
"""

from app.engine.settings import THEMES
from app.ui.look.colors import DARK, LIGHT, SCHEMES, SchemeColors
from app.ui.look.theme import ThemeManager, apply_theme, scheme_for

__all__ = [
    "DARK",
    "LIGHT",
    "SCHEMES",
    "THEMES",
    "SchemeColors",
    "ThemeManager",
    "apply_theme",
    "scheme_for",
]
