"""What both APIs share: configuration, the queue, body reading, errors, the request log and
metrics, the request fields they have in common, and the plumbing of :class:`.server.ApiServer`.

Nothing here imports :mod:`..openai`, :mod:`..anthropic` or :mod:`..responses` (checked by
tests/test_architecture.py).
"""
