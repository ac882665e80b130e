"""Stable identifiers (DESIGN "Values and ids")."""

from __future__ import annotations

import hashlib
import os
import re


def stable_int64(*parts: str) -> int:
    """A positive int64 derived from ``parts``: the same inputs give the same id on any machine."""
    digest = hashlib.blake2b("\x00".join(parts).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") & 0x7FFF_FFFF_FFFF_FFFF


def column_id(dataset_id: str, content_sha256: str, ordinal: int) -> int:
    """Global column id: stable while the dataset's content is unchanged."""
    return stable_int64(dataset_id, content_sha256, str(ordinal))


def dataset_id(kind: str, key: str, label: str) -> str:
    """A readable, path-safe dataset id: ``<kind>-<label slug>-<hash of key>``; stable for the same key."""
    slug = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")[:60] or "dataset"
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=5).hexdigest()
    return f"{kind}-{slug}-{digest}"


def sha256_file(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    """The SHA-256 of a file's bytes, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            h.update(block)
    return h.hexdigest()
