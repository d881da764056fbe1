"""The MLX backend: mlx-lm's model classes with MTP heads built by the project.

:mod:`.backend` is the facade (``MlxBackend``); :mod:`.heads` and :mod:`.sidecar` build the head,
:mod:`.drafting` drafts with it, :mod:`.conversations` and :mod:`.kept_states` are the prefix
reuse, :mod:`.trunk_caches` and :mod:`.verify_states` roll the trunk back, :mod:`.text` is the
tokenizer.
"""
