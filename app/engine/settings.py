"""The user's settings, the app's places on disk, and the Hub token — shared by the GUI and the CLI.

Why one module: the GUI's settings dialog and every CLI command must agree on where things live
(platformdirs folders, the Hugging Face cache) and on which Hub and token a job uses. Settings are
a typed, versioned JSON file in the platformdirs config folder, written atomically; older versions
are upgraded on load. The token is never stored here: it stays in ``HF_TOKEN`` or in the standard
``$HF_HOME/token`` file that ``hf auth login`` writes, so other Hugging Face tools share it, and it
is only ever shown masked.

``MTP_STUDIO_HOME`` (a folder) replaces every platformdirs folder with sub-folders of it, so tests
and portable installs never touch the real user folders.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import platformdirs

from app.engine.errors import HubError, MtpStudioError
from app.engine.load_options import DEFAULT_STATE_CACHE_MIB, LoadOptions, load_options_problem

APP_NAME = "mtp-studio"
HOME_OVERRIDE_ENV = "MTP_STUDIO_HOME"
SETTINGS_VERSION = 1
DEFAULT_ENDPOINT = "https://huggingface.co"
BACKENDS = ("auto", "llama.cpp", "mlx")
THEMES = ("system", "light", "dark")  # "system" follows the OS light/dark scheme
BUNDLED_CATALOG = "(bundled)"  # stands for the bundled catalog in Settings.catalog_files


class SettingsError(MtpStudioError):
    """The settings file or a settings value is invalid."""


@dataclass(frozen=True)
class AppDirs:
    """Where the app keeps its own files (models go to the Hugging Face cache instead)."""

    config: Path
    data: Path
    cache: Path
    logs: Path

    @property
    def settings_file(self) -> Path:
        return self.config / "settings.json"

    @property
    def job_database(self) -> Path:
        return self.data / "jobs.sqlite3"

    @property
    def grafted_models(self) -> Path:
        """GGUFs made by grafting an MTP head into a base that lives in a Hugging Face cache."""
        return self.data / "grafted"

    @property
    def converted_models(self) -> Path:
        """Loadable copies of FP8 checkpoints whose source lives in a Hugging Face cache."""
        return self.data / "converted"

    @property
    def default_scratch(self) -> Path:
        return self.cache / "scratch"


def app_dirs() -> AppDirs:
    """The platformdirs folders, or sub-folders of ``$MTP_STUDIO_HOME`` when it is set."""
    home = os.environ.get(HOME_OVERRIDE_ENV)
    if home:
        root = Path(home).expanduser()
        return AppDirs(root / "config", root / "data", root / "cache", root / "logs")
    return AppDirs(
        config=Path(platformdirs.user_config_dir(APP_NAME, appauthor=False)),
        data=Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)),
        cache=Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False)),
        logs=Path(platformdirs.user_log_dir(APP_NAME, appauthor=False)),
    )


def hf_hub_cache() -> Path:
    """The standard Hugging Face hub cache (``HF_HUB_CACHE``, ``$HF_HOME/hub``), read now."""
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


@dataclass(frozen=True)
class Settings:
    """Everything the user can change; an empty path or endpoint means "the standard default"."""

    hub_endpoint: str = ""
    scratch_dir: str = ""
    models_dir: str = ""
    file_in_collection: bool = True
    default_backend: str = "auto"
    catalog_files: tuple[str, ...] = ()  # empty: the bundled catalog only
    theme: str = "system"
    context_length: int = 0  # 0: chosen from the model and the machine's memory
    kv_cache_type: str = "f16"
    flash_attention: str = "auto"
    state_cache_mib: int = DEFAULT_STATE_CACHE_MIB
    threads: int = 0  # 0: what llama.cpp's own tools use (the physical performance cores)

    @property
    def endpoint(self) -> str:
        """The Hub to talk to: this setting, else ``HF_ENDPOINT``, else huggingface.co."""
        chosen = self.hub_endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT
        return chosen.rstrip("/")

    def models_path(self) -> Path:
        """Where downloads go by default: a Hugging Face cache folder, shared with other tools."""
        return Path(self.models_dir).expanduser() if self.models_dir else hf_hub_cache()

    @property
    def load_options(self) -> LoadOptions:
        """How the chat window loads a local model."""
        return LoadOptions(
            context_length=self.context_length,
            kv_cache_type=self.kv_cache_type,
            flash_attention=self.flash_attention,
            state_cache_mib=self.state_cache_mib,
            threads=self.threads,
        )

    def validated(self) -> Settings:
        """Return self, or raise :class:`SettingsError` naming the bad field and the fix."""
        if self.hub_endpoint and not self.hub_endpoint.startswith(("http://", "https://")):
            raise SettingsError(
                f"hub_endpoint {self.hub_endpoint!r} is not a URL; "
                f"use e.g. {DEFAULT_ENDPOINT} or leave it empty for the default"
            )
        if self.default_backend not in BACKENDS:
            raise SettingsError(
                f"default_backend {self.default_backend!r} is unknown; "
                f"choose one of {', '.join(BACKENDS)}"
            )
        if self.theme not in THEMES:
            raise SettingsError(
                f"theme {self.theme!r} is unknown; choose one of {', '.join(THEMES)}"
            )
        problem = load_options_problem(self.load_options)
        if problem is not None:
            raise SettingsError(problem)
        return self


def _check_version(raw: dict[str, Any], path: Path) -> None:
    """Refuse a document from a newer app (older versions get upgraded here once they exist)."""
    version = raw.get("version", SETTINGS_VERSION)
    if not isinstance(version, int) or version > SETTINGS_VERSION:
        raise SettingsError(
            f"{path}: settings version {version!r} is newer than this app understands "
            f"({SETTINGS_VERSION}); update MTP Studio or delete the file to start from defaults"
        )


_FIELD_TYPES: dict[str, type] = {
    "hub_endpoint": str,
    "scratch_dir": str,
    "models_dir": str,
    "file_in_collection": bool,
    "default_backend": str,
    "catalog_files": list,
    "theme": str,
    "context_length": int,
    "kv_cache_type": str,
    "flash_attention": str,
    "state_cache_mib": int,
    "threads": int,
}


def _from_document(raw: dict[str, Any], path: Path) -> Settings:
    values: dict[str, Any] = {}
    for name, value in raw.items():
        expected = _FIELD_TYPES.get(name)
        if expected is None:
            continue  # "version", or a field of a newer release: ignored, not an error
        if (
            not isinstance(value, expected)
            or (expected is int and isinstance(value, bool))
            or (expected is list and not all(isinstance(item, str) for item in value))
        ):
            kind = "list of paths" if expected is list else expected.__name__
            raise SettingsError(
                f"{path}: field {name!r} must be a {kind}, got {value!r}; "
                "fix it in the settings dialog or delete the file to start from defaults"
            )
        values[name] = tuple(value) if expected is list else value
    try:
        return Settings(**values).validated()
    except SettingsError as exc:
        raise SettingsError(f"{path}: {exc}") from None


class SettingsStore:
    """Loads and saves :class:`Settings` in one JSON file."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or app_dirs().settings_file

    def load(self) -> Settings:
        """The saved settings, defaults when none were saved; a broken file raises SettingsError."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return Settings()
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SettingsError(
                f"{self.path}: not valid JSON (line {exc.lineno}: {exc.msg}); "
                "fix it or delete the file to start from defaults"
            ) from None
        if not isinstance(raw, dict):
            raise SettingsError(f"{self.path}: expected a JSON object; delete the file to reset")
        _check_version(raw, self.path)
        return _from_document(raw, self.path)

    def save(self, settings: Settings) -> None:
        """Validate, write to a temporary name, then rename: a crash never leaves half a file."""
        settings.validated()
        document = {"version": SETTINGS_VERSION, **asdict(settings)}
        document["catalog_files"] = list(settings.catalog_files)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        os.replace(temporary, self.path)

    def update(self, **changes: Any) -> Settings:
        """Load, change some fields, save, and return the result."""
        settings = replace(self.load(), **changes)
        self.save(settings)
        return settings


@dataclass(frozen=True)
class TokenStatus:
    """Which token a job would use, shown masked; the token itself never leaves huggingface_hub."""

    source: str  # "HF_TOKEN", "token file" or "" when signed out
    masked: str
    token_file: Path

    @property
    def signed_in(self) -> bool:
        return bool(self.source)


def mask_token(token: str) -> str:
    """``hf_abcdefgh1234`` → ``hf_…1234``: enough to tell tokens apart, never enough to use one."""
    if len(token) <= 8:
        return "…"
    prefix = token[:3] if token.startswith("hf_") else ""
    return f"{prefix}…{token[-4:]}"


def token_status() -> TokenStatus:
    """Where the token comes from, resolved the way huggingface_hub resolves it."""
    from huggingface_hub import constants, get_token

    token_file = Path(constants.HF_TOKEN_PATH)
    token = get_token()
    if not token:
        return TokenStatus("", "", token_file)
    from_env = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    source = "HF_TOKEN" if from_env and from_env.strip() == token else "token file"
    return TokenStatus(source, mask_token(token), token_file)


def sign_in(token: str, endpoint: str) -> str:
    """Check ``token`` against ``endpoint``, then make it the active token in the standard file.

    Returns the user name. huggingface_hub's ``login()`` validates against its import-time
    endpoint only, so the check is done here against the chosen Hub, then the library's own token
    helpers store the token exactly as ``hf auth login`` does.
    """
    import httpx2
    from huggingface_hub import HfApi
    from huggingface_hub._login import _set_active_token
    from huggingface_hub.errors import HfHubHTTPError
    from huggingface_hub.utils._auth import _save_token

    token = token.strip()
    if not token:
        raise SettingsError("the token is empty; paste a token from your Hub account settings")
    try:
        info = HfApi(endpoint=endpoint).whoami(token=token)
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        if status == 401:
            raise HubError(
                f"{endpoint} rejected the token; create a new one at {endpoint}/settings/tokens"
            ) from None
        raise HubError(f"could not check the token with {endpoint}: HTTP {status}") from None
    except httpx2.TransportError as exc:
        raise HubError(
            f"could not reach {endpoint} to check the token ({type(exc).__name__}); "
            "check the network or the Hub endpoint in Settings"
        ) from None
    access = (info.get("auth") or {}).get("accessToken") or {}
    name = access.get("displayName") or f"mtp-studio-{info['name']}"
    _save_token(token=token, token_name=name)
    _set_active_token(token_name=name, add_to_git_credential=False)
    return str(info["name"])
