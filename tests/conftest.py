"""Test setup shared by every area of the suite — keep it minimal.

The first lines point ``huggingface_hub`` at the local test hub: the client reads ``HF_ENDPOINT``
and friends when it is first imported, so this must happen before any test module loads.
Qt runs offscreen. Fixtures that several test folders share are defined in their own module and
imported here: every test gets its own app and Hugging Face folders (``home``, autouse) and has
the widgets it handed to Qt deleted when it ends; ``open_window``/``main_window`` give a test
main windows it owns; the local hub and llama.cpp's ``llama-server`` are started once per
session (per xdist worker; tests/workers.py says how the suite shares out among workers).
Fixtures used by one folder belong in that folder's conftest.py.
"""

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from tests.localhub.fixtures import configure_client_environment

configure_client_environment()

from tests.llama_server import llama_server_binary, mtp_llama_server  # noqa: E402, F401
from tests.localhub.fixtures import hf_api, local_hub, local_hub_server  # noqa: E402, F401
from tests.store.isolation import home  # noqa: E402, F401
from tests.windows import deleted_widgets_released, main_window, open_window  # noqa: E402, F401
from tests.workers import pytest_collection_modifyitems  # noqa: E402, F401
