"""What a source hands to ingestion: one ``Resource`` per dataset it lists.

A source only lists and downloads; hashing, parsing, quarantine and the catalog belong to
``lakejoin.ingest`` so every source gets the same rules.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


class SourceUnavailable(Exception):
    """The whole listing failed (portal down): ingestion keeps every stored dataset of the source
    as it was instead of marking them removed."""


@dataclass
class Resource:
    """One dataset as a source sees it in this run.

    Exactly one of three outcomes: ``local_path`` set (content fetched, ingestion hashes and
    parses it), ``unchanged`` (the source knows the stored version is current: portal metadata
    or a 304), or ``error`` (fetch failed: the reason is recorded, stored content is kept and
    the next run retries).
    """

    dataset_id: str
    source: str
    url: str
    title: str
    format: str
    local_path: Path | None = None
    unchanged: bool = False
    error: str | None = None
    publisher: str | None = None
    license: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    metadata_modified: str | None = None


class Source(Protocol):
    """A source lists every dataset it currently has; datasets it stops listing become removed."""

    spec: str

    def resources(self, previous: Mapping[str, Mapping[str, Any]], workdir: Path) -> Iterator[Resource]:
        """Yield one Resource per dataset. ``previous`` maps dataset_id to its stored catalog row
        (etag, last_modified, content_sha256, ...) for conditional fetches; ``workdir`` is where
        downloads go. Raise SourceUnavailable if the listing itself fails."""
        ...
