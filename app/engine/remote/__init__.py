"""Remote backends: chat with any OpenAI-compatible server (vLLM or SGLang on a cluster,
llama-server, another MTP Studio) and show its MTP acceptance when the server reports it.

:class:`RemoteEndpoint` streams chat replies (:mod:`client`); :mod:`acceptance` reads the
acceptance from MTP Studio's ``mtp`` extension, llama-server's ``timings`` or vLLM's /metrics.
"""

from app.engine.remote.acceptance import RemoteAcceptance
from app.engine.remote.client import RemoteEndpoint, RemoteReply, RemoteStream

__all__ = ["RemoteAcceptance", "RemoteEndpoint", "RemoteReply", "RemoteStream"]
