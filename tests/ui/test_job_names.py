"""The Jobs page names every job readably at the default window size: the whole title shows
("Download org/name (all files)", not "Do…s)") and the other columns fit their content."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtGui import QFontMetrics

from app.engine.convert.job import ConvertRequest
from app.engine.download.request import DownloadRequest
from app.engine.hub.job import publish_job_spec
from app.engine.hub.publish import PublishOptions
from app.engine.jobs import ProgressEvent, StageEvent
from app.engine.publish_plan import MtpSidecarPlan
from app.engine.settings import app_dirs
from app.engine.store import JobSpec, JobState, JobStore
from app.ui.main_window import MainWindow
from app.ui.shell.pages import JOBS
from app.ui.shell.window_size import PREFERRED
from tests.store.isolation import IsolatedHome

SHOTS = Path("/tmp/shots-convert25")


def _record_jobs(home: IsolatedHome, tmp_path: Path) -> list[str]:
    """A finished download, publish and conversion in the job history, as a user's would be."""
    download = DownloadRequest(
        repo_id="mtp-studio/Demo-MTP-FP8", destination=str(tmp_path), endpoint="http://hub"
    )
    plan = MtpSidecarPlan("mtp-studio/Demo-MTP-FP8", "mtp-studio/Demo-MTP-mtp", tmp_path / "m")
    convert = ConvertRequest(tmp_path / "Demo-MTP-FP8", tmp_path / "Demo-MTP-mlx-4bit", 4)
    specs = [
        publish_job_spec(plan, PublishOptions()),
        convert.spec(),
        JobSpec("download", download.title, download.to_params()),
    ]
    app_dirs().data.mkdir(parents=True, exist_ok=True)
    store = JobStore(app_dirs().job_database)
    try:
        for spec in specs:
            job_id = store.create(spec)
            store.mark_running(job_id)
            store.record(job_id, StageEvent("fetch"))
            store.record(job_id, ProgressEvent("fetch", 12_500_000, 12_500_000))
            store.finish(job_id, JobState.SUCCEEDED)
    finally:
        store.close()
    return [spec.title for spec in specs]


def test_job_names_show_whole_at_the_default_window_size(
    qtbot, home: IsolatedHome, tmp_path: Path, open_window: Callable[[], MainWindow]
) -> None:
    titles = _record_jobs(home, tmp_path)
    assert titles == [
        "Publish sidecar mtp-studio/Demo-MTP-mtp",
        "Convert Demo-MTP-FP8 to MLX 4-bit",
        "Download mtp-studio/Demo-MTP-FP8 (all files)",
    ]
    window = open_window()
    window.resize(PREFERRED)  # the size a first run takes on a screen with room for it
    window.show()
    window.show_page(JOBS)
    qtbot.waitExposed(window)
    SHOTS.mkdir(parents=True, exist_ok=True)
    window.grab().save(str(SHOTS / "jobs-page.png"))
    table = window.monitor.table
    metrics = QFontMetrics(table.font())
    shown = [table.model().index(row, 0).data() for row in range(3)]
    assert sorted(shown) == sorted(titles)
    width = table.columnWidth(0)
    for title in titles:
        assert metrics.horizontalAdvance(title) + 16 <= width, (title, width)
    for column in range(1, table.model().columnCount()):
        assert table.columnWidth(column) >= table.sizeHintForColumn(column), column
    assert table.horizontalScrollBar().maximum() == 0  # every column in view
