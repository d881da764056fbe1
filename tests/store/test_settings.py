"""Settings: typed, versioned, atomic, isolated; the token shown masked and never stored here."""

from __future__ import annotations

import json

import pytest

from app.engine.settings import (
    DEFAULT_ENDPOINT,
    Settings,
    SettingsError,
    SettingsStore,
    app_dirs,
    mask_token,
    token_status,
)
from tests.store.isolation import IsolatedHome

TOKEN = "hf_SecretTokenValue1234"


def test_app_folders_follow_the_home_override(home: IsolatedHome) -> None:
    dirs = app_dirs()
    root = home.root / "mtp-studio"
    assert dirs.settings_file == root / "config" / "settings.json"
    assert dirs.job_database == root / "data" / "jobs.sqlite3"
    assert dirs.logs == root / "logs"
    assert Settings().models_path() == home.hub_cache


def test_defaults_when_nothing_was_saved_and_a_round_trip(
    home: IsolatedHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_ENDPOINT")
    store = SettingsStore()
    assert store.load() == Settings()
    assert Settings().endpoint == DEFAULT_ENDPOINT
    changed = store.update(
        hub_endpoint="http://127.0.0.1:8080/",
        models_dir=str(home.root / "models"),
        file_in_collection=False,
        default_backend="llama.cpp",
        catalog_files=(str(home.root / "mine.yaml"),),
    )
    assert SettingsStore().load() == changed
    assert changed.endpoint == "http://127.0.0.1:8080"
    saved = json.loads(store.path.read_text())
    assert saved["version"] == 1
    assert [path.name for path in store.path.parent.iterdir()] == ["settings.json"]


def test_endpoint_falls_back_to_hf_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.example.com")
    assert Settings().endpoint == "https://hub.example.com"
    assert Settings(hub_endpoint="http://127.0.0.1:1").endpoint == "http://127.0.0.1:1"


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ("{not json", r"not valid JSON \(line 1"),
        ('{"file_in_collection": "yes"}', "field 'file_in_collection' must be a bool"),
        ('{"default_backend": "tpu"}', "default_backend 'tpu' is unknown; choose one of auto"),
        ('{"hub_endpoint": "huggingface.co"}', "hub_endpoint 'huggingface.co' is not a URL"),
        ('{"catalog_files": "a.yaml"}', "field 'catalog_files' must be a list of paths"),
        ('{"version": 7}', "settings version 7 is newer than this app understands"),
    ],
)
def test_a_broken_settings_file_names_the_file_and_the_fix(
    home: IsolatedHome, document: str, expected: str
) -> None:
    store = SettingsStore()
    store.path.parent.mkdir(parents=True)
    store.path.write_text(document)
    with pytest.raises(SettingsError, match=expected) as caught:
        store.load()
    assert str(store.path) in str(caught.value)


def test_an_invalid_value_is_refused_and_the_good_file_kept(home: IsolatedHome) -> None:
    store = SettingsStore()
    good = store.update(default_backend="mlx")
    with pytest.raises(SettingsError, match="default_backend"):
        store.save(Settings(default_backend="cuda-magic"))
    assert store.load() == good


def test_unknown_fields_from_a_newer_minor_release_are_ignored(home: IsolatedHome) -> None:
    store = SettingsStore()
    store.path.parent.mkdir(parents=True)
    store.path.write_text('{"version": 1, "default_backend": "mlx", "sidebar": "wide"}')
    assert store.load() == Settings(default_backend="mlx")


def test_mask_shows_only_enough_to_recognise_a_token() -> None:
    assert mask_token(TOKEN) == "hf_…1234"
    assert mask_token("short") == "…"
    assert "Secret" not in mask_token(TOKEN)


def test_token_status_reads_env_first_then_the_standard_file(
    home: IsolatedHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not token_status().signed_in
    home.token_file.parent.mkdir(parents=True)
    home.token_file.write_text("hf_FileTokenabcd9876\n")
    status = token_status()
    assert (status.source, status.masked, status.token_file) == (
        "token file",
        "hf_…9876",
        home.token_file,
    )
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    status = token_status()
    assert (status.source, status.masked) == ("HF_TOKEN", "hf_…1234")
    assert TOKEN not in repr(status)
