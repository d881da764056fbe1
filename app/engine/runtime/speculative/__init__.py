"""The backend-agnostic generation loop: the speculative cycle and the policies around it.

:mod:`.cycle` drafts, verifies, accepts and commits one cycle; :mod:`.generation` runs a whole
reply (plain or MTP) over any :class:`~app.engine.runtime.core.backend.DecodeBackend`;
:mod:`.depth_policy` and its helpers choose the draft depth and stop drafting that does not pay.
"""
