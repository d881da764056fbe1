"""The runtime's contract: what a backend implements, what a request asks and what it reports.

:mod:`.backend` is the interface every backend implements; :mod:`.request` the request, chunk and
result types that cross the process boundary; :mod:`.stats` the statistics defined once and shown
everywhere; :mod:`.demo_model` where the bundled model lives.
"""
