"""Git and Git-LFS object ids, computed the way the Hub computes them.

Why: the real client compares these ids (``ETag`` of a regular file is its git blob id, an LFS
file is known by the SHA-256 of its content and the git id of its pointer file), so the local hub
must produce the same values for the client to make the same decisions (skip unchanged files,
verify downloads).
"""

from __future__ import annotations

import hashlib

LFS_SIZE_THRESHOLD = 10 * 1000 * 1000
"""Files at least this large are stored in LFS whatever their name (the Hub's rule of thumb)."""

LFS_SUFFIXES = (
    ".safetensors",
    ".bin",
    ".gguf",
    ".pt",
    ".pth",
    ".ckpt",
    ".h5",
    ".msgpack",
    ".onnx",
    ".npz",
    ".npy",
    ".zip",
    ".gz",
    ".tar",
    ".parquet",
    ".arrow",
    ".model",
)
"""The patterns of the Hub's default ``.gitattributes`` (by suffix)."""

DEFAULT_GITATTRIBUTES = "".join(
    f"*{suffix} filter=lfs diff=lfs merge=lfs -text\n" for suffix in LFS_SUFFIXES
).encode()


def git_blob_oid(content: bytes) -> str:
    """The git object id of a blob: ``sha1(b"blob <size>\\0" + content)``."""
    digest = hashlib.sha1(b"blob %d\0" % len(content))
    digest.update(content)
    return digest.hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    """The pointer file git stores in place of an LFS object."""
    return (
        f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()
    )


def stored_in_lfs(path: str, size: int) -> bool:
    """Whether the Hub would keep this file in LFS (by name pattern or by size)."""
    return path.lower().endswith(LFS_SUFFIXES) or size >= LFS_SIZE_THRESHOLD
