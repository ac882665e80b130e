"""Sources: where datasets come from. A spec is ``kind:location``, e.g. ``folder:/data``,
``ckan:https://demo.ckan.org``, ``socrata:https://data.example.gov``."""

from __future__ import annotations

import importlib
from typing import Any

from lakejoin.sources.base import Resource, Source, SourceUnavailable

# kind -> "module:factory"; the factory takes (location, **options) and returns a Source.
SOURCE_KINDS = {
    "folder": "lakejoin.sources.folder:FolderSource",
    "ckan": "lakejoin.sources.ckan:CkanSource",
    "socrata": "lakejoin.sources.socrata:SocrataSource",
}


def open_source(spec: str, **options: Any) -> Source:
    """Instantiate the source a spec names; unknown kinds get a clear error."""
    kind, sep, location = spec.partition(":")
    if not sep or kind not in SOURCE_KINDS:
        raise ValueError(f"unknown source {spec!r}: expected one of {', '.join(k + ':...' for k in SOURCE_KINDS)}")
    module_name, factory = SOURCE_KINDS[kind].split(":")
    return getattr(importlib.import_module(module_name), factory)(location, **options)


__all__ = ["Resource", "Source", "SourceUnavailable", "open_source"]
