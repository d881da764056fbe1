"""Regenerates screenshots of every window and wizard page, to look at the app without clicking.

Why: layout slips (truncated text, empty panes, a wizard page with nothing on it) only show when
someone looks. This drives the real app against the local test hub (``tests/localhub``) with a
small model, a publishable source checkpoint and a catalog that has a broken entry, and saves a
PNG per window or page. Run it under a real X server for real fonts and decorations:

    xvfb-run -a -s "-screen 0 2048x1200x24" .venv/bin/python tools/screenshots.py
    # → scratch/screenshots/
    QT_QPA_PLATFORM=offscreen .venv/bin/python tools/screenshots.py --out /tmp/shots
    xvfb-run -a -s "-screen 0 2048x1200x24" .venv/bin/python tools/screenshots.py --only vision

Everything happens in a temporary home folder; the user's settings, history and token are
never touched.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPO = "acme/tiny-mtp-model"
PAGE_SIZES = ((1280, 800), (1024, 640), (1920, 1080))
MY_CATALOG = """\
# my own catalog
models:
  - key: qwen3-6b-mlx-4bit
    source_model: Qwen/Qwen3-6B
    quant: 4bit
    tier: small
    slices: [full]
    output_name: Qwen3-6B-mlx-4bit
    hf_repo: acme/Qwen3-6B-mlx-4bit
    mtp_source_repo: Qwen/Qwen3-6B
    mtp_sidecar_repo: acme/qwen3-6b-mtp
  - key: tiny-mtp-model
    source_model: acme/tiny-mtp-model
    quant: bf16
    tier: small
    slices: [full]
    output_name: tiny-mtp-model
    hf_repo: acme/tiny-mtp-model
  - key: Broken_Entry
    source_model: Qwen/Qwen3-6B
    quant: 8bit
    tier: small
    slices: [full]
    output_name: Qwen3-6B-8bit
    hf_repo: acme/Qwen3-6B-mlx-4bit
    mtp_source_repo: Qwen/Qwen3-6B
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "scratch" / "screenshots")
    parser.add_argument(
        "--only",
        choices=("vision",),
        help="one tour: vision (a conversation with a picture on the vision demo, at a small "
        "laptop's sizes, light and dark)",
    )
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="mtp-studio-screens-"))
    hub_data = home / "hub-data"
    hub_data.mkdir()
    # huggingface_hub reads these when first imported: set them before anything imports it.
    os.environ.update(
        {
            "MTP_STUDIO_HOME": str(home / "app"),
            "HF_HOME": str(home / "hf"),
            "HF_HUB_DISABLE_XET": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_TOKEN": "hf_screenshots_only_token_0000",
        }
    )
    sys.path.insert(0, str(ROOT))
    from tests.localhub import LocalHub

    with LocalHub(hub_data, user="mtp-tester", orgs=("acme", "mtp-studio")) as hub:
        os.environ["HF_ENDPOINT"] = hub.endpoint
        shooter = Shooter(hub, home, args.out)
        return shooter.run_vision() if args.only == "vision" else shooter.run()


class Shooter:
    def __init__(self, hub: object, home: Path, out: Path) -> None:
        from PySide6.QtWidgets import QApplication

        self.hub = hub
        self.home = home
        self.out = out
        out.mkdir(parents=True, exist_ok=True)
        for old in out.glob("*.png"):
            old.unlink()
        self.app = QApplication.instance() or QApplication(sys.argv)
        self.count = 0

    # -- helpers ------------------------------------------------------------------------------

    def pump(self, seconds: float = 0.2) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.app.processEvents()
            time.sleep(0.01)

    def wait(self, condition: Callable[[], bool], seconds: float = 30.0) -> None:
        end = time.monotonic() + seconds
        while not condition():
            if time.monotonic() > end:
                raise TimeoutError("the app did not reach the expected state")
            self.pump(0.05)

    def shot(self, widget: object, name: str) -> None:
        self.pump(0.3)
        self.count += 1
        path = self.out / f"{self.count:02d}-{name}.png"
        widget.grab().save(str(path))  # type: ignore[attr-defined]
        print(path)

    # -- the tour -----------------------------------------------------------------------------

    def seed(self) -> None:
        from tests.hub.sources import FAMILIES, seed_source

        hub = self.hub
        seed_source(hub, FAMILIES["qwen-bf16"], self.home / "checkpoint")  # type: ignore[arg-type]
        hub.seed_files(  # type: ignore[attr-defined]
            REPO,
            {
                "config.json": b'{"model_type": "qwen3_5", "mtp_num_hidden_layers": 1}',
                "model.safetensors": os.urandom(48_000_000),
                "mtp.safetensors": os.urandom(6_000_000),
                "README.md": b"# tiny MTP model\n",
            },
        )
        hub.seed_files("mtp-studio/qwen3-6-27b-mtp", {"mtp.safetensors": b"heads"})  # type: ignore[attr-defined]
        catalog = self.home / "my-catalog.yaml"
        catalog.write_text(MY_CATALOG)
        from app.engine.settings import BUNDLED_CATALOG, SettingsStore

        SettingsStore().update(
            hub_endpoint=hub.endpoint,  # type: ignore[attr-defined]
            scratch_dir=str(self.home / "scratch"),
            catalog_files=(BUNDLED_CATALOG, str(catalog)),
        )

    def run(self) -> int:
        self.seed()
        from app.engine.settings import app_dirs
        from app.ui.main_window import MainWindow

        window = MainWindow(app_dirs())
        window.resize(1400, 900)
        window.show()
        book = window.status_book
        self.wait(lambda: book.status("mtp-studio/qwen3-6-27b-mtp").published.value == "yes")
        self.shot(window, "home-first-run")
        self.main_window_tour(window)
        self.download_tour(window)
        self.publish_tour(window)
        self.dialogs_tour(window)
        self.graft_tour(window)
        self.chat_tour(window)
        self.pages_tour(window)
        window.shutdown()
        window.close()
        print(f"{self.count} screenshots in {self.out}")
        return 0

    def main_window_tour(self, window: object) -> None:
        window.show_page("catalog")  # type: ignore[attr-defined]
        browser = window.browser  # type: ignore[attr-defined]
        browser.select_key("qwen3-6-27b-mlx-4bit")
        self.shot(window, "main-window")
        browser.search_edit.setText("qwen3.6")
        self.shot(window, "main-window-search")
        browser.search_edit.setText("no such model")
        self.shot(window, "main-window-no-match")
        browser.search_edit.clear()
        browser.select_key("Broken_Entry")
        self.shot(window, "main-window-entry-with-problems")
        browser.select_key("qwen3-6b-mlx-4bit")
        editor = browser.edit_entry("qwen3-6b-mlx-4bit")
        editor.edits["hf_repo"].setText("acme/tiny-mtp-model")  # taken by another entry
        self.shot(editor, "entry-editor-validating")
        editor.reject()

    def download_tour(self, window: object) -> None:
        hub = self.hub
        wizard = window.open_download_wizard(REPO)  # type: ignore[attr-defined]
        wizard.repo_page.pattern_radio.setChecked(True)
        wizard.repo_page.pattern_edit.setText("*.json *.safetensors")
        self.shot(wizard, "download-1-what")
        wizard.next()
        self.wait(lambda: wizard.plan_page.plan is not None)
        self.shot(wizard, "download-2-files-and-destination")
        hub.faults.slow(match="model.safetensors", delay_s=0.05, times=None)  # type: ignore[attr-defined]
        hub.faults.drop_download(match="model.safetensors", after_bytes=20_000_000, times=1)  # type: ignore[attr-defined]
        wizard.next()
        job = wizard.run_page.job_id
        row = window.jobs.job(job)  # type: ignore[attr-defined]
        self.wait(lambda: row.stage == "download" and row.done > 8_000_000)
        self.shot(wizard, "download-3-running")
        window.runner.set_paused(job, True)  # type: ignore[attr-defined]
        self.wait(lambda: row.paused)
        self.shot(wizard, "download-3-paused")
        window.runner.set_paused(job, False)  # type: ignore[attr-defined]
        self.wait(wizard.run_page.isComplete, 120)
        hub.faults.clear()  # type: ignore[attr-defined]
        self.shot(wizard, "download-3-done")
        wizard.accept()

    def publish_tour(self, window: object) -> None:
        browser = window.browser  # type: ignore[attr-defined]
        browser.select_key("qwen3-6b-mlx-4bit")
        wizard = window.publish_sidecar("qwen3-6b-mlx-4bit")  # type: ignore[attr-defined]
        self.shot(wizard, "publish-1-entry")
        wizard.next()
        self.shot(wizard, "publish-2-dry-run")
        wizard.next()
        self.wait(wizard.preflight_page.isComplete)
        self.shot(wizard, "publish-3-preflight")
        wizard.next()
        self.wait(wizard.run_page.isComplete, 120)
        self.shot(wizard, "publish-4-run-done")
        wizard.next()
        self.shot(wizard, "publish-5-result")
        wizard.accept()
        again = window.publish_sidecar("qwen3-6b-mlx-4bit")  # type: ignore[attr-defined]
        again.next()
        again.next()
        self.wait(again.preflight_page.isComplete)
        self.shot(again, "publish-3-preflight-already-published")
        again.reject()
        window.monitor.select_job(window.jobs.job_at(0).job_id)  # type: ignore[attr-defined]
        window.show_page("jobs")  # type: ignore[attr-defined]
        self.shot(window, "jobs-after-publish")
        window.show_page("catalog")  # type: ignore[attr-defined]

    def dialogs_tour(self, window: object) -> None:
        from PySide6.QtWidgets import QApplication, QMessageBox

        from app.engine.errors import DownloadError
        from app.ui.errors import show_error

        settings = window.open_settings()  # type: ignore[attr-defined]
        self.shot(settings, "settings")
        settings.reject()
        sign_in = window.open_sign_in()  # type: ignore[attr-defined]
        self.shot(sign_in, "sign-in")
        sign_in.reject()
        show_error(
            window,  # type: ignore[arg-type]
            "Cannot download",
            DownloadError(
                "not enough free disk space in /data/models: the download needs 54.0 GB more, "
                "12.3 GB is free; free some space or choose another destination"
            ),
        )
        self.pump()
        [box] = [w for w in QApplication.topLevelWidgets() if isinstance(w, QMessageBox)]
        self.shot(box, "error-message")
        box.close()

        window._about()  # type: ignore[attr-defined]
        self.shot(window.about_box, "about")  # type: ignore[attr-defined]
        window.about_box.close()  # type: ignore[attr-defined]

    def graft_tour(self, window: object) -> None:
        """A GGUF without its head beside its sidecar: the offer, the question, the result."""
        from PySide6.QtWidgets import QMessageBox

        from app.engine.mtp import LocalFolderSource, extract_mtp
        from tests.graft.bases import DEMO_FP8, DEMO_GGUF, write_trunk_only

        wizard = window.open_download_wizard(  # type: ignore[attr-defined]
            "mtp-studio/Qwen3.6-27B-Q4_K_M-GGUF", sidecar_repo="mtp-studio/qwen3-6-27b-mtp"
        )
        self.shot(wizard, "download-1-gguf-with-graft-offer")
        wizard.reject()
        folder = self.home / "my-models"
        folder.mkdir()
        base = write_trunk_only(DEMO_GGUF, folder / "Demo-Q8_0.gguf")
        extract_mtp(LocalFolderSource(DEMO_FP8), folder / "mtp.safetensors")
        chat = window.open_chat()  # type: ignore[attr-defined]
        chat.open_model(base)
        self.wait(lambda: chat.model_bar.state.text() == f"Ready: {base.name}", 60)
        self.shot(window, "chat-gguf-without-head-offers-graft")
        chat.model_bar.graft_button.click()
        self.wait(lambda: chat.graft.confirmation is not None)
        self.shot(chat.graft.confirmation, "chat-graft-question")
        chat.graft.confirmation.button(QMessageBox.StandardButton.Yes).click()
        grafted = "Demo-Q8_0-mtp.gguf"
        self.wait(lambda: chat.model_bar.state.text() == f"Ready: {grafted}", 60)
        chat.replies.send("Write a function that reverses a string.")
        self.wait(lambda: not chat.streaming, 60)
        self.shot(window, "chat-grafted-gguf-drafts")

    def chat_tour(self, window: object) -> None:
        """The demo: a reply with its Details open, then a second version (‹ 2/2 ›)."""
        chat = window.chat_with_demo()  # type: ignore[attr-defined]
        self.wait(lambda: chat.model_bar.state.text() == "Ready: demo-mtp.gguf", 60)
        chat.new_conversation()
        chat.replies.send("Write a Python function that reverses a string.")
        self.wait(lambda: not chat.streaming, 60)
        reply = chat.transcript.messages[-1]
        reply.details_button.setChecked(True)
        self.shot(window, "chat-demo-reply-details")
        reply.regenerate_button.click()
        self.wait(lambda: not chat.streaming, 60)
        chat.transcript.messages[-1].details_button.setChecked(True)
        self.shot(window, "chat-demo-second-version")

    def run_vision(self) -> int:
        from app.engine.settings import app_dirs
        from app.ui.main_window import MainWindow

        window = MainWindow(app_dirs())
        window.show()
        self.vision_tour(window)
        window.shutdown()
        window.close()
        print(f"{self.count} screenshots in {self.out}")
        return 0

    def vision_tour(self, window: object) -> None:
        """A conversation with a picture on the vision demo (the thumbnail in the message, one
        waiting above the box, the projector in the model bar) at a small laptop's sizes, light
        and dark; the picture seen larger; a model without a projector saying so."""
        from app.engine.runtime.core.demo_model import DEMO_MODEL_FILENAME, DEMO_VISION_MODEL

        chat = window.open_chat()  # type: ignore[attr-defined]
        chat.open_model(DEMO_VISION_MODEL)
        self.wait(lambda: chat.model_bar.state.text() == f"Ready: {DEMO_VISION_MODEL.name}", 60)
        chat.settings_panel.temperature.setValue(0.0)
        chat.settings_panel.max_tokens.setValue(48)
        chat.new_conversation()
        pictures = [self.write_picture(f"photo-{n}.png", n) for n in (1, 2)]
        chat.attachments.attach_files(pictures[:1])
        self.wait(
            lambda: chat.composer.attachments.tiles and chat.composer.attachments.tiles[0].loaded
        )
        chat.composer.editor.setPlainText("What is in this picture?")
        chat.composer.send_button.click()
        self.wait(lambda: not chat.streaming, 60)
        chat.attachments.attach_files(pictures[1:])
        self.wait(
            lambda: chat.composer.attachments.tiles and chat.composer.attachments.tiles[0].loaded
        )
        chat.composer.editor.setPlainText("And this one?")
        window.showNormal()  # type: ignore[attr-defined]
        for theme in ("light", "dark"):
            window.set_theme(theme)  # type: ignore[attr-defined]
            for width, height in ((1280, 800), (1024, 640)):
                window.resize(width, height)  # type: ignore[attr-defined]
                self.pump()
                chat.transcript.verticalScrollBar().setValue(0)  # the picture in view
                self.shot(window, f"vision-{theme}-{width}x{height}")
        tile = chat.transcript.messages[0].pictures.tiles[0]
        viewer = tile.open_viewer()
        self.wait(lambda: viewer.loaded)
        self.shot(viewer, "vision-dark-viewer")
        viewer.close()
        window.set_theme("light")  # type: ignore[attr-defined]
        chat.open_model(chat.model_choice.model_sources().demo_dir / DEMO_MODEL_FILENAME)
        self.wait(lambda: chat.model_bar.state.text() == f"Ready: {DEMO_MODEL_FILENAME}", 60)
        chat.composer.send_button.click()  # a picture waits: the banner says why not
        self.shot(window, "vision-light-1024x640-no-projector")
        window.set_theme("system")  # type: ignore[attr-defined]

    def write_picture(self, name: str, seed: int) -> Path:
        """A small made-up photo: a sky, a sun, a hill (seeded)."""
        from PIL import Image, ImageDraw

        image = Image.new("RGB", (480, 320), (120 + seed * 30, 170, 230))
        draw = ImageDraw.Draw(image)
        draw.ellipse((330 - seed * 120, 40, 410 - seed * 120, 120), fill=(250, 210, 60))
        draw.polygon([(0, 320), (0, 220), (200, 160), (480, 240), (480, 320)], fill=(70, 140, 70))
        path = self.home / name
        image.save(path)
        return path

    def pages_tour(self, window: object) -> None:
        """Every page at a small laptop's size and at full HD, light and dark."""
        window.showNormal()  # type: ignore[attr-defined]
        for theme in ("light", "dark"):
            window.set_theme(theme)  # type: ignore[attr-defined]
            for width, height in PAGE_SIZES:
                window.resize(width, height)  # type: ignore[attr-defined]
                for key in window.page_widgets:  # type: ignore[attr-defined]
                    window.show_page(key)  # type: ignore[attr-defined]
                    self.shot(window, f"page-{theme}-{width}x{height}-{key}")
            shortcuts = window.show_shortcuts()  # type: ignore[attr-defined]
            self.shot(shortcuts, f"keyboard-shortcuts-{theme}")
            shortcuts.close()
        window.set_theme("system")  # type: ignore[attr-defined]


if __name__ == "__main__":
    sys.exit(main())
