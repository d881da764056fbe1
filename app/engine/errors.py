"""One exception type per area, all under a common root.

The CLI and GUI catch :class:`MtpStudioError` and show its message as is, so every message must
name what is wrong (file, field, tensor) and say how to fix it. Anything else that escapes is a
bug and is shown with its traceback in the log only.
"""


class MtpStudioError(Exception):
    """Root of every error the user is meant to read."""


class CatalogError(MtpStudioError):
    """A catalog file or entry is invalid, or a key is unknown."""


class ExtractError(MtpStudioError):
    """A checkpoint cannot be read, has no MTP heads, or a tensor cannot be dequantised."""


class ScratchError(MtpStudioError):
    """The scratch folder is unusable or a clean-up was refused as dangerous."""


class HubError(MtpStudioError):
    """A Hub request failed (network, auth, missing repo) in a way the user must act on."""


class PublishError(MtpStudioError):
    """Publishing a sidecar cannot go on (configuration, pre-flight or upload failure)."""


class DownloadError(MtpStudioError):
    """A download cannot start or complete (disk space, checksum, network)."""


class RuntimeBackendError(MtpStudioError):
    """A model cannot be loaded or run by the chosen inference backend."""


class ImageError(MtpStudioError):
    """An image cannot be given to a model: not PNG/JPEG/WebP, damaged, over a limit, or the
    model has no vision projector. ``too_large``: the file is over the byte limit (HTTP 413)."""

    def __init__(self, message: str, *, too_large: bool = False) -> None:
        super().__init__(message)
        self.too_large = too_large


class UnrunnableBuildError(RuntimeBackendError):
    """The inference library holds an instruction this CPU does not run (its worker died by
    SIGILL): every retry would crash the same way, so callers stop instead of retrying."""


class WorkerStopped(RuntimeBackendError):
    """The inference worker process died (a native crash, out of memory, a kill) — not the
    request's fault; the next request starts a fresh worker."""


class JobCancelled(MtpStudioError):
    """A job stopped because its cancellation token was set."""


class GraftError(MtpStudioError):
    """A sidecar's MTP head cannot be grafted into a GGUF (mismatch, damaged file, no space)."""


class ServerError(MtpStudioError):
    """The local OpenAI-compatible server cannot start (unsafe bind, port in use, bad setting)."""


class RemoteError(MtpStudioError):
    """A remote OpenAI-compatible server cannot be reached or answered with an error."""


class LibraryError(MtpStudioError):
    """A model on disk cannot be deleted (demo, outside the model folders, permission, in use)."""


class ConvertError(MtpStudioError):
    """A checkpoint cannot be converted (not FP8, output in the way, mlx-lm refused it)."""


class DrafterError(MtpStudioError):
    """A separate drafter model (Gemma 4 assistant) cannot be read or does not fit its target."""
