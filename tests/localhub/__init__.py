"""A Hugging Face Hub-compatible HTTP server for tests and manual trials (standard library only).

Why it exists: no development or CI machine here reaches the Hub, yet publishing and downloading
must be tested with the real ``huggingface_hub`` client. This server speaks the wire protocol the
client uses (docs/development.md#the-wire-protocol-it-speaks) with real commits, counts every
byte it serves, and injects faults.

Start it by hand: ``python -m tests.localhub --port 8123 --data /tmp/hub`` and set
``HF_ENDPOINT`` to the printed URL. In tests use the ``local_hub`` fixture
(tests/localhub/fixtures.py, exposed through tests/conftest.py).
"""

from tests.localhub.server import LocalHub

__all__ = ["LocalHub"]
