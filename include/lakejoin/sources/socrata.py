"""Socrata crawler (``socrata:https://data.city.gov``): Discovery API ``/api/catalog/v1`` paged by
limit/offset, each dataset exported as CSV through SODA ``/resource/<id>.csv``, paged with
``$limit/$offset`` (ordered by ``:id``) because SODA caps every response.

Incremental as Auctus does it: ``resource.updatedAt`` is the change token; an unchanged token
means no download; otherwise a conditional GET on a single-page export (a 304 is unchanged) and
ingestion's content hash decides. Multi-page exports are stitched into one CSV (header once).
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from typing_extensions import override

from lakejoin.sources.base import Resource, Source, SourceUnavailable
from lakejoin.sources.ckan import portal_key
from lakejoin.sources.http import (
    Download,
    FetchError,
    HttpClient,
    HttpPolicy,
    conditional_validators,
    fetch_concurrently,
    guarded,
    local_download_path,
    metadata_unchanged,
)


@dataclass(frozen=True)
class SocrataListing:
    """One dataset as the Discovery API lists it."""

    dataset_id: str
    four_by_four: str
    title: str
    publisher: str | None
    license: str | None
    updated_at: str | None


def parse_catalog_page(document: Mapping[str, Any], key: str) -> tuple[list[SocrataListing], int]:
    """The datasets of one Discovery API page, and the total the API reports (``resultSetSize``)."""
    listings = []
    for entry in document["results"]:
        resource = entry["resource"]
        if resource.get("type", "dataset") != "dataset":
            continue
        metadata = entry.get("metadata") or {}
        owner = entry.get("owner") or {}
        listings.append(
            SocrataListing(
                dataset_id=f"socrata:{key}:{resource['id']}",
                four_by_four=resource["id"],
                title=resource.get("name") or resource["id"],
                publisher=resource.get("attribution") or owner.get("display_name"),
                license=metadata.get("license"),
                updated_at=resource.get("updatedAt") or resource.get("data_updated_at"),
            )
        )
    return listings, int(document.get("resultSetSize", 0))


def csv_page_shape(path: Path) -> tuple[list[str], int]:
    """Header and number of data records of one exported CSV page."""
    with path.open(newline="", encoding="utf-8", errors="replace") as handle:
        reader = csv.reader(handle)
        header = next(reader, [])
        return header, sum(1 for _ in reader)


class SocrataSource(Source):
    """A Socrata domain; options are the paging knobs below plus every HttpPolicy field."""

    def __init__(
        self,
        location: str,
        *,
        domain: str | None = None,
        page_size: int = 100,
        export_page_rows: int = 50_000,
        workers: int = 4,
        **http_options: Any,
    ) -> None:
        if page_size < 1 or export_page_rows < 1:
            raise ValueError("page_size and export_page_rows must be positive")
        self.spec = f"socrata:{location}"
        self.location = location.rstrip("/")
        self.key = portal_key(location)
        self.domain = domain or urlsplit(location).hostname
        self.page_size = page_size
        self.export_page_rows = export_page_rows
        self.workers = workers
        self.client = HttpClient(HttpPolicy.from_options(http_options))

    def list_datasets(self) -> list[SocrataListing]:
        """Every dataset of the domain; SourceUnavailable if any catalog page fails."""
        listings: dict[str, SocrataListing] = {}
        offset, total = 0, None
        while total is None or offset < total:
            params = {"domains": self.domain, "only": "dataset", "limit": self.page_size, "offset": offset}
            try:
                document = self.client.get_json(f"{self.location}/api/catalog/v1", params)
                page, total = parse_catalog_page(document, self.key)
                returned = len(document["results"])
            except (FetchError, KeyError, TypeError, ValueError) as exc:
                raise SourceUnavailable(f"{self.spec}: catalog failed at offset={offset}: {exc}") from exc
            for listing in page:
                listings.setdefault(listing.dataset_id, listing)
            if not returned:
                break
            offset += returned
        return list(listings.values())

    @override
    def resources(self, previous: Mapping[str, Mapping[str, Any]], workdir: Path) -> Iterator[Resource]:
        listings = self.list_datasets()
        tasks = [self._task(listing, previous.get(listing.dataset_id), workdir) for listing in listings]
        yield from fetch_concurrently(tasks, self.workers)

    def export_url(self, four_by_four: str) -> str:
        """The SODA CSV export URL of the dataset ``four_by_four``."""
        return f"{self.location}/resource/{four_by_four}.csv"

    def _task(self, listing: SocrataListing, stored: Mapping[str, Any] | None, workdir: Path) -> Callable[[], Resource]:
        resource = Resource(
            dataset_id=listing.dataset_id,
            source=self.spec,
            url=self.export_url(listing.four_by_four),
            title=listing.title,
            format="csv",
            publisher=listing.publisher,
            license=listing.license,
            metadata_modified=listing.updated_at,
        )
        return lambda: guarded(resource, lambda: self._fetch(resource, stored, workdir))

    def _fetch(self, resource: Resource, stored: Mapping[str, Any] | None, workdir: Path) -> Resource:
        if metadata_unchanged(stored, resource.metadata_modified, resource.url):
            return replace(resource, unchanged=True, etag=stored.get("etag"), last_modified=stored.get("last_modified"))
        target = local_download_path(workdir, resource.dataset_id, ".csv")
        first = self._page(resource.url, target, 0, **conditional_validators(stored, resource.url))
        if first.not_modified:
            return replace(resource, unchanged=True, etag=first.etag, last_modified=first.last_modified)
        header, rows = csv_page_shape(target)
        if rows < self.export_page_rows:
            return replace(resource, local_path=target, etag=first.etag, last_modified=first.last_modified)
        self._stitch_remaining_pages(resource.url, target, header)
        # a multi-page export has no single validator: the change token and the hash decide
        return replace(resource, local_path=target, last_modified=first.last_modified)

    def _page(
        self,
        url: str,
        dest: Path,
        offset: int,
        etag: str | None = None,
        last_modified: str | None = None,
        max_bytes: int | None = None,
    ) -> Download:
        params = {"$limit": self.export_page_rows, "$offset": offset, "$order": ":id"}
        got = self.client.download(
            url, dest, params=params, etag=etag, last_modified=last_modified, max_bytes=max_bytes
        )
        if not got.not_modified and got.kind != "text":
            dest.unlink(missing_ok=True)
            raise FetchError(f"export page at offset {offset} looks like {got.kind} ({got.content_type}), not CSV")
        return got

    def _stitch_remaining_pages(self, url: str, target: Path, header: list[str]) -> None:
        """Append pages at offsets L, 2L, ... (records only) until a short page; the whole file
        stays within ``max_bytes``."""
        page_path = target.with_suffix(".page")
        offset = self.export_page_rows
        try:
            with target.open("a", newline="", encoding="utf-8", errors="surrogateescape") as out:
                writer = csv.writer(out, lineterminator="\n")
                while True:
                    out.flush()
                    remaining = self.client.policy.max_bytes - target.stat().st_size
                    if remaining <= 0:
                        raise FetchError(f"export exceeds {self.client.policy.max_bytes} bytes")
                    self._page(url, page_path, offset, max_bytes=remaining)
                    with page_path.open(newline="", encoding="utf-8", errors="surrogateescape") as page:
                        reader = csv.reader(page)
                        if next(reader, []) != header:
                            raise FetchError(f"export page at offset {offset} has a different header")
                        rows = 0
                        for rows, record in enumerate(reader, start=1):  # noqa: B007 (the count is read after the loop)
                            writer.writerow(record)
                    if rows < self.export_page_rows:
                        return
                    offset += self.export_page_rows
        except BaseException:
            target.unlink(missing_ok=True)
            raise
        finally:
            page_path.unlink(missing_ok=True)
