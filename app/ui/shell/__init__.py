"""The one-window shell: a sidebar of pages (Home, Models, Catalog, Chat, Jobs, Server)."""
