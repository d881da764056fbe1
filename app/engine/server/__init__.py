"""An OpenAI- and Anthropic-compatible HTTP server over the MTP runtime (``mtp-studio serve``).

Editors, Open WebUI and scripts using the ``openai`` client call it like any OpenAI endpoint; every
reply also carries the request's MTP statistics in an ``mtp`` extension object (as llama-server's
``timings`` does). Each model a request names runs in a worker process of its own, loaded on
demand; each model's requests wait in a bounded FIFO (:mod:`.core.scheduler`),
:func:`.app.build_app` is the Starlette application and :class:`ServerConfig` its settings.
Rooms: :mod:`.models` (what can be served and what is loaded), :mod:`.core` (what the APIs
share), :mod:`.openai`, :mod:`.responses` (OpenAI's Responses API) and :mod:`.anthropic` (each
API's parsing, replies and routes; none imports another), :mod:`.app` (wires them). Qt-free: the
Server panel runs this in a subprocess.
"""

from app.engine.server.core.config import ServerConfig, check_bind

__all__ = ["ServerConfig", "check_bind"]
