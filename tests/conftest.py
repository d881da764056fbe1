"""Test setup shared by every area of the suite — keep it minimal.

The first lines point ``huggingface_hub`` at the local test hub: the client reads ``HF_ENDPOINT``
and friends when it is first imported, so this must happen before any test module loads.
Other areas may add fixtures that several test folders share here (import them from their own
module, as below); fixtures used by one folder belong in that folder's conftest.py.
"""

from tests.localhub.fixtures import configure_client_environment

configure_client_environment()

from tests.llama_server import llama_server_binary  # noqa: E402, F401
from tests.localhub.fixtures import hf_api, local_hub, local_hub_server  # noqa: E402, F401
