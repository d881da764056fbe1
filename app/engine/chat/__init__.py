"""The chat window's Qt-free core: conversations, their SQLite history, export, model discovery.

The window (``app/ui/chat``) only renders and forwards clicks; everything a conversation *is* —
what is stored, how it is exported, which models can be picked and what they would cost in
memory — lives here so it can be tested without Qt and reused by the CLI.
"""
