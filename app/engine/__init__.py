"""The Qt-free engine: catalog, MTP extraction, Hub access, jobs, local store and runtime.

Nothing under this package may import Qt (a test enforces it), so every feature runs headless.
"""
