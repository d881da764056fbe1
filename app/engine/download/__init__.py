"""Resumable, verified downloads into the Hugging Face cache (or a plain folder).

Users of desktop LLM apps lose most to downloads that stall, restart from zero or leave a broken
file where a model should be. Here every byte lands in a partial file that survives a crash,
every file is checked against the Hub's ids before it gets its real name, and the cache layout is
the standard one, so other tools reuse the files.
"""

from app.engine.download.job import DownloadJob, DownloadResult, download_job_from_params
from app.engine.download.request import CACHE, FOLDER, DownloadRequest

__all__ = [
    "CACHE",
    "FOLDER",
    "DownloadJob",
    "DownloadRequest",
    "DownloadResult",
    "download_job_from_params",
]
