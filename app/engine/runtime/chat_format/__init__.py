"""Chat formatting: messages to prompt text, tools and output constraints, replies back to calls.

Wire-format-free (no HTTP API shapes) so the chat window, the CLI and both server APIs share it.
"""
