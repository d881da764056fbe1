"""The two colour schemes of the app, and the QPalette each one becomes.

Why a table of named colours instead of a palette built in place: the palette, the stylesheet
(for the few colours a palette has no role for: hover tint, error/success/warning text) and the
tests that check contrast all read the same values. Neutral greys, one accent (the blue of the app
icon); text, placeholder, link and accent-button text meet WCAG AA (4.5:1) on the backgrounds
they are drawn on, in both schemes.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtGui import QColor, QPalette

ACCENT = "#2d5be3"  # the blue of resources/icons/mtp-studio.svg


@dataclass(frozen=True)
class SchemeColors:
    """One scheme's colours, as ``#rrggbb`` (or ``#aarrggbb`` for the translucent hover tint)."""

    name: str  # "light" or "dark"
    window: str  # page background
    window_text: str
    base: str  # inputs, lists, tables, cards
    alternate_base: str  # every other table row
    text: str
    button: str
    button_text: str
    light: str  # the bevel colours Fusion draws with (check boxes, sliders, frames)
    midlight: str  # subtle 1px borders: cards, tables, separators
    mid: str  # input and button borders, scroll bar handles
    dark: str
    shadow: str
    placeholder: str  # placeholder text, muted labels, subtitles
    accent: str  # selection, primary buttons, focus ring, badges
    accent_hover: str
    accent_text: str  # text on the accent
    link: str
    link_visited: str
    disabled_text: str
    disabled_button: str
    disabled_accent: str  # a disabled primary button: a faded accent ...
    disabled_accent_text: str  # ... with faded text, so it never reads as enabled
    strong_border: str  # check box and radio outlines, hovered inputs and buttons
    hover: str  # a translucent tint laid over whatever is under the pointer
    error: str
    success: str
    warning: str


LIGHT = SchemeColors(
    name="light",
    window="#f3f4f6",
    window_text="#1d2127",
    base="#ffffff",
    alternate_base="#f7f8fa",
    text="#1d2127",
    button="#ffffff",
    button_text="#1d2127",
    light="#ffffff",
    midlight="#e3e5e9",
    mid="#cdd1d8",
    dark="#9aa1ab",
    shadow="#6b7280",
    placeholder="#5f6673",
    accent=ACCENT,
    accent_hover="#2550cc",
    accent_text="#ffffff",
    link="#2451d6",
    link_visited="#6f42c1",
    disabled_text="#9aa1ab",
    disabled_button="#eceef1",
    disabled_accent="#b4c4f2",
    disabled_accent_text="#eef2fd",
    strong_border="#9aa1ab",
    hover="#141d2127",
    error="#c62828",
    success="#1e7d34",
    warning="#8a5c00",
)

DARK = SchemeColors(
    name="dark",
    window="#1b1c1f",
    window_text="#e8e9ec",
    base="#232428",
    alternate_base="#27292d",
    text="#e8e9ec",
    button="#2b2d32",
    button_text="#e8e9ec",
    light="#45484f",
    midlight="#313338",
    mid="#43464d",
    dark="#101113",
    shadow="#000000",
    placeholder="#9197a1",
    accent=ACCENT,
    accent_hover="#3a68ee",
    accent_text="#ffffff",
    link="#8ab4ff",
    link_visited="#c4a7ff",
    disabled_text="#6b7079",
    disabled_button="#24262a",
    disabled_accent="#252f4b",
    disabled_accent_text="#737d99",
    strong_border="#6b7079",
    hover="#1fe8e9ec",
    error="#ff7b72",
    success="#4ade80",
    warning="#f5b942",
)

SCHEMES = {"light": LIGHT, "dark": DARK}


def build_palette(colors: SchemeColors) -> QPalette:
    """Every colour role, for the active, inactive (same as active) and disabled groups."""
    role = QPalette.ColorRole
    roles = {
        role.Window: colors.window,
        role.WindowText: colors.window_text,
        role.Base: colors.base,
        role.AlternateBase: colors.alternate_base,
        role.Text: colors.text,
        role.Button: colors.button,
        role.ButtonText: colors.button_text,
        role.BrightText: colors.error,
        role.Light: colors.light,
        role.Midlight: colors.midlight,
        role.Mid: colors.mid,
        role.Dark: colors.dark,
        role.Shadow: colors.shadow,
        role.PlaceholderText: colors.placeholder,
        role.Highlight: colors.accent,
        role.HighlightedText: colors.accent_text,
        role.Accent: colors.accent,
        role.Link: colors.link,
        role.LinkVisited: colors.link_visited,
        role.ToolTipBase: colors.base,  # a tooltip is a small card: base and text, as the
        role.ToolTipText: colors.text,  # stylesheet draws it (readable in both schemes)
    }
    disabled = {
        role.WindowText: colors.disabled_text,
        role.Text: colors.disabled_text,
        role.ButtonText: colors.disabled_text,
        role.PlaceholderText: colors.disabled_text,
        role.Button: colors.disabled_button,
        role.Highlight: colors.disabled_accent,
        role.Accent: colors.disabled_accent,
        role.Link: colors.disabled_text,
    }
    palette = QPalette()
    for group in (QPalette.ColorGroup.Active, QPalette.ColorGroup.Inactive):
        for which, value in roles.items():
            palette.setColor(group, which, QColor(value))
    for which, value in roles.items():
        palette.setColor(QPalette.ColorGroup.Disabled, which, QColor(disabled.get(which, value)))
    return palette
