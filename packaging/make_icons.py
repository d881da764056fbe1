"""Renders the app icon for every platform from ``resources/icons/mtp-studio.svg``.

One SVG is the source of truth; the bundle needs PNGs (Linux ``.desktop`` and hicolor theme), an
``.icns`` (macOS) and an ``.ico`` (Windows). Qt's SVG renderer draws the sizes (offscreen, no
display needed) and Pillow packs them into the two container formats.

    python packaging/make_icons.py OUT_DIR
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

from PIL import Image
from PySide6.QtCore import QBuffer, QIODevice, Qt
from PySide6.QtGui import QGuiApplication, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

SOURCE = Path(__file__).resolve().parents[1] / "resources" / "icons" / "mtp-studio.svg"
PNG_SIZES = (16, 24, 32, 48, 64, 128, 256, 512, 1024)
ICO_SIZES = [(size, size) for size in (16, 24, 32, 48, 64, 128, 256)]


def render(renderer: QSvgRenderer, size: int) -> Image.Image:
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter)
    painter.end()
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")
    return Image.open(io.BytesIO(bytes(buffer.data()))).convert("RGBA")


def make_icons(out_dir: Path) -> list[Path]:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    _app = QGuiApplication.instance() or QGuiApplication([])
    renderer = QSvgRenderer(str(SOURCE))
    if not renderer.isValid():
        raise SystemExit(f"make_icons: {SOURCE} is not a valid SVG")
    out_dir.mkdir(parents=True, exist_ok=True)
    images = {size: render(renderer, size) for size in PNG_SIZES}
    written = []
    for size, image in images.items():
        path = out_dir / f"mtp-studio-{size}.png"
        image.save(path)
        written.append(path)
    images[1024].save(out_dir / "mtp-studio.icns")
    images[256].save(out_dir / "mtp-studio.ico", sizes=ICO_SIZES)
    written += [out_dir / "mtp-studio.icns", out_dir / "mtp-studio.ico"]
    return written


if __name__ == "__main__":
    for path in make_icons(Path(sys.argv[1] if len(sys.argv) > 1 else "packaging/build/icons")):
        print(path)
