"""The worker process: native inference runs there, front ends talk to it through a client.

A native abort or out-of-memory takes down only the worker; :mod:`.client` restarts it and
streams its :mod:`.messages` to the caller.
"""
