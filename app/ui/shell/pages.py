"""The main window's pages, in sidebar order: key, title, icon, shortcut and what each is for.

One list so the sidebar, the View menu, the keyboard-shortcuts dialog and the saved window state
all agree on which pages exist and what they are called.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PageSpec:
    key: str
    title: str
    icon: str
    shortcut: str
    summary: str


HOME = "home"
MODELS = "models"
CATALOG = "catalog"
CHAT = "chat"
JOBS = "jobs"
SERVER = "server"

PAGES: tuple[PageSpec, ...] = (
    PageSpec(HOME, "Home", "home", "Ctrl+1", "Get started, recent conversations and jobs"),
    PageSpec(MODELS, "Models", "models", "Ctrl+2", "Every model on disk, its size and MTP"),
    PageSpec(CATALOG, "Catalog", "catalog", "Ctrl+3", "Browse the catalog, publish sidecars"),
    PageSpec(CHAT, "Chat", "chat", "Ctrl+4", "Chat with a local or remote model"),
    PageSpec(JOBS, "Jobs", "jobs", "Ctrl+5", "Downloads, publishes and grafts"),
    PageSpec(SERVER, "Server", "server", "Ctrl+6", "An OpenAI-compatible local server"),
)
