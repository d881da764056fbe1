"""The icon set: every named icon ships as a 24×24 currentColor SVG, draws crisp at the sizes
and scales asked for, in the palette's colour, and re-tints when the theme switches."""

from __future__ import annotations

import re
import tomllib
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QByteArray, QSize
from PySide6.QtGui import QColor, QIcon, QImage, QPalette
from PySide6.QtSvg import QSvgRenderer

from app.ui.icons import ICON_DIR, ICON_NAMES, icon
from app.ui.look import SCHEMES, apply_theme
from app.ui.look.stylesheet import CONTROLS, window_stylesheet

ROOT = Path(__file__).resolve().parents[2]
SVG = "{http://www.w3.org/2000/svg}"
APP_ICON = "mtp-studio.svg"


def test_every_named_icon_is_a_24px_outline_svg_and_none_is_unnamed() -> None:
    on_disk = {path.stem for path in ICON_DIR.glob("*.svg") if path.name != APP_ICON}
    assert on_disk == set(ICON_NAMES), "every SVG in resources/icons is named in ICON_NAMES"
    assert (ICON_DIR / APP_ICON).is_file()
    for name in ICON_NAMES:
        path = ICON_DIR / f"{name}.svg"
        root = ElementTree.parse(path).getroot()
        assert root.tag == f"{SVG}svg", path
        assert root.get("viewBox") == "0 0 24 24", path
        assert root.get("stroke") == "currentColor", path
        assert root.get("fill") == "none", path
        assert root.get("stroke-linecap") == "round", path
        assert 1.75 <= float(root.get("stroke-width", "0")) <= 2, path
        colours = set(re.findall(r'(?:fill|stroke)="([^"]+)"', path.read_text()))
        assert colours <= {"none", "currentColor"}, f"{path}: hard-coded colours {colours}"
        assert QSvgRenderer(QByteArray(path.read_bytes())).isValid(), path


def test_the_arrows_and_marks_the_stylesheet_draws_exist() -> None:
    sheet = window_stylesheet(SCHEMES["light"], 10.0)
    used = [Path(found) for found in re.findall(r'url\("([^"]+)"\)', sheet)]
    assert used, "the stylesheet draws combo/spin arrows, the check mark and the radio dot"
    for path in used:
        assert path.parent == CONTROLS
        assert QSvgRenderer(str(path)).isValid(), path


def rgba(image: QImage) -> np.ndarray:
    """The image as an (height, width, 4) array of un-premultiplied red, green, blue, alpha."""
    converted = image.convertToFormat(QImage.Format.Format_RGBA8888)
    rows = np.frombuffer(converted.constBits(), np.uint8).reshape(
        converted.height(), converted.bytesPerLine()
    )
    pixels = rows[:, : converted.width() * 4].reshape(converted.height(), converted.width(), 4)
    return pixels.copy()  # the buffer dies with ``converted``


def ink(image: QImage, min_alpha: int = 255) -> np.ndarray:
    """The (red, green, blue) of the pixels at least ``min_alpha`` opaque (255: strokes without
    their anti-aliased edges)."""
    pixels = rgba(image)
    return pixels[pixels[..., 3] >= min_alpha][:, :3].astype(int)


def colour_names(strokes: np.ndarray) -> set[str]:
    return {QColor(*map(int, rgb)).name() for rgb in np.unique(strokes, axis=0)}


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_icon_draws_in_the_text_colour_at_each_size_and_scale(
    restored_look, scheme: str
) -> None:
    apply_theme(restored_look, scheme)
    text = np.array(QColor(SCHEMES[scheme].window_text).getRgb()[:3])
    for name in ICON_NAMES:
        for size in (16, 24, 48):
            for scale in (1.0, 2.0):
                pixmap = icon(name).pixmap(QSize(size, size), scale)
                assert pixmap.devicePixelRatio() == scale
                assert pixmap.width() == pixmap.height() == round(size * scale), name
                image = pixmap.toImage()
                drawn = ink(image, min_alpha=1)
                assert len(drawn) >= size * scale, f"{name} at {size}px ×{scale} is empty"
                strokes = ink(image, min_alpha=128)
                assert len(strokes), f"{name} at {size}px ×{scale} has no solid stroke"
                # equal up to the rounding of un-premultiplying half-transparent edge pixels
                assert np.abs(strokes - text).max() <= 3, f"{name}: {colour_names(strokes)}"


def test_an_icon_already_handed_out_re_tints_when_the_theme_switches(restored_look) -> None:
    settings = icon("settings")
    apply_theme(restored_look, "light")
    light = ink(settings.pixmap(24).toImage())
    apply_theme(restored_look, "dark")
    dark = ink(settings.pixmap(24).toImage())
    assert colour_names(light) == {SCHEMES["light"].window_text}
    assert colour_names(dark) == {SCHEMES["dark"].window_text}


def test_modes_and_roles_pick_their_palette_colours(restored_look) -> None:
    apply_theme(restored_look, "light")
    colors = SCHEMES["light"]
    play = icon("play")

    def colours(pixmap_icon: QIcon, mode: QIcon.Mode = QIcon.Mode.Normal) -> set[str]:
        return colour_names(ink(pixmap_icon.pixmap(QSize(24, 24), mode).toImage()))

    assert colours(play, QIcon.Mode.Disabled) == {colors.disabled_text}
    assert colours(play, QIcon.Mode.Selected) == {colors.accent_text}  # on a selected item
    on_accent = icon("play", QPalette.ColorRole.HighlightedText)
    assert colours(on_accent) == {colors.accent_text}
    assert icon("play") is play, "icons are cached per name and role"


def test_an_unknown_icon_names_itself_and_the_folder() -> None:
    with pytest.raises(LookupError, match=rf"no icon named 'rocket' in {re.escape(str(ICON_DIR))}"):
        icon("rocket")


def test_the_icons_ship_in_the_wheel_and_the_bundle() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "*.svg" in pyproject["tool"]["setuptools"]["package-data"]["*"]
    spec = (ROOT / "packaging" / "mtp-studio.spec").read_text()
    assert '(str(ROOT / "resources"), "resources")' in spec, "the bundle copies resources/ whole"
