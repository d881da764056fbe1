"""Masking credentials in any text the app prints, logs, stores or publishes.

A Hub endpoint may carry a secret: ``HF_ENDPOINT=https://user:hf_xxx@mirror.example`` or a
``?token=`` query. The endpoint appears in error messages, job logs, the job history, the log
file and the model card's source link, so every one of those sinks passes its text through
:func:`mask_credentials` — one function, so a new sink cannot mask differently. Hub tokens
(``hf_…``) anywhere in the text are masked too.
"""

from __future__ import annotations

import re

MASK = "***"
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@?#\"'<>]+@")
_SECRET_QUERY = re.compile(
    r"(?i)([?&](?:token|access_token|api_key|apikey|key|password|passwd|secret|signature|sig)=)"
    r"[^&#\s\"'<>]+"
)
_HUB_TOKEN = re.compile(r"hf_[A-Za-z0-9]{6,}")


def mask_credentials(text: str) -> str:
    """``text`` with URL user-info, secret query values and Hub tokens replaced by a mask."""
    text = _USERINFO.sub(rf"\1{MASK}@", text)
    text = _SECRET_QUERY.sub(rf"\1{MASK}", text)
    return _HUB_TOKEN.sub("hf_…", text)
