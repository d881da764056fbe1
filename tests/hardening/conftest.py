import pytest

from tests.store.isolation import IsolatedHome, isolate


@pytest.fixture(autouse=True)
def home(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> IsolatedHome:
    return isolate(monkeypatch, tmp_path_factory.mktemp("home"))
