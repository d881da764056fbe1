"""An OpenAI-compatible HTTP server over the MTP runtime (``mtp-studio serve``).

Editors, Open WebUI and scripts using the ``openai`` client call it like any OpenAI endpoint; every
reply also carries the request's MTP statistics in an ``mtp`` extension object (as llama-server's
``timings`` does). One model runs in the runtime's worker process; requests wait in a bounded FIFO
(:mod:`scheduler`), :func:`app.build_app` is the Starlette application and :class:`ServerConfig`
its settings. Qt-free: the Server panel runs this in a subprocess.
"""

from app.engine.server.config import ServerConfig, check_bind

__all__ = ["ServerConfig", "check_bind"]
