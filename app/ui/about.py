"""The Help → About text: what this is, the versions of every native part, where its files live.

Bug reports need the exact versions of Qt, llama.cpp (llama-cpp-python) and mlx; reading them
here from package metadata keeps the dialog instant and free of native imports.
"""

from __future__ import annotations

import html

from PySide6.QtCore import qVersion

from app.engine.settings import AppDirs
from app.engine.versions import component_versions


def about_html(dirs: AppDirs, job_history: object) -> str:
    versions = component_versions()
    rows = "".join(
        f"<tr><td>{html.escape(name)}</td><td>&nbsp;{html.escape(value)}</td></tr>"
        for name, value in [*versions.lines(), ("Qt (runtime)", qVersion())]
    )
    return (
        f"<b>MTP Studio {html.escape(versions.app)}</b><p>Publish, download and run "
        "Multi-Token-Prediction models with native MTP speculative decoding.</p>"
        f"<table>{rows}</table>"
        f"<p>Settings: {html.escape(str(dirs.settings_file))}<br>"
        f"Job history: {html.escape(str(job_history))}<br>"
        f"Logs: {html.escape(str(dirs.logs))}</p>"
    )
