"""``folder:PATH`` — every CSV/TSV/Parquet/JSON-lines file under a folder is a dataset."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from typing_extensions import override

from lakejoin.ids import dataset_id
from lakejoin.sources.base import Resource, Source, SourceUnavailable
from lakejoin.sources.parse import detect_format

TABLE_SUFFIXES = (".csv", ".tsv", ".tab", ".txt", ".parquet", ".pq", ".jsonl", ".ndjson", ".json")


class FolderSource(Source):
    """Lists table files recursively (hidden files and folders skipped). The dataset id hashes the
    file's absolute path, so it is stable for the same file; a file that disappears is simply no
    longer listed and ingestion marks its dataset removed."""

    def __init__(self, location: str, **_options: Any) -> None:
        self.root = Path(location).expanduser().resolve()
        self.spec = f"folder:{self.root}"

    @override
    def resources(self, previous: Mapping[str, Mapping[str, Any]], workdir: Path) -> Iterator[Resource]:
        if not self.root.is_dir():
            raise SourceUnavailable(f"folder {self.root} does not exist")
        for path in sorted(self.root.rglob("*")):
            relative = path.relative_to(self.root)
            if not path.is_file() or path.suffix.lower() not in TABLE_SUFFIXES:
                continue
            if any(part.startswith(".") for part in relative.parts):
                continue
            yield Resource(
                dataset_id=dataset_id("f", str(path), str(relative.with_suffix(""))),
                source=self.spec,
                url=str(path),
                title=str(relative),
                format=detect_format(path),
                local_path=path,
            )
