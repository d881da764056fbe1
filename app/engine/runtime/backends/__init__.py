"""Inference backends behind the :class:`~app.engine.runtime.core.backend.DecodeBackend` contract.

One folder per backend (:mod:`.llama_cpp`, :mod:`.mlx`); :mod:`.choice` picks one for a model
file, :mod:`.prefix_cache` plans the prefix reuse both share, :mod:`.gguf_info` reads a GGUF's
header before anything native loads.
"""
