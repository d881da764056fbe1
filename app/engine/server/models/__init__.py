"""What the server can serve and what it holds loaded, below the HTTP plumbing (no HTTP here).

:mod:`.catalogue` lists the servable models (the library's inventory, with ids and short names),
:mod:`.names` resolves a request's ``model``, :mod:`.loading` plans and opens a model's worker,
:mod:`.runner` is the seam a scheduler runs generations through (how many sequences at once),
and :mod:`.pool` keeps the loaded models within the memory budget and unloads idle ones.
docs/server-api.md#models.
"""
