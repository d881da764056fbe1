"""The llama.cpp backend, driven through llama-cpp-python's low-level ctypes layer.

:mod:`.backend` is the facade (``LlamaCppBackend``); :mod:`.model` loads the GGUF and makes
contexts, :mod:`.contexts` wraps one, :mod:`.vocab` is the vocabulary, :mod:`.drafter` the
interface of what drafts and :mod:`.mtp_head` the model's own head as one, :mod:`.kept_states`
the prefix reuse per lane, :mod:`.decode` the requests; :mod:`.batch` and :mod:`.log` serve them.
"""
