"""The PySide6 desktop front end over ``app.engine`` (the only package allowed to import Qt)."""
