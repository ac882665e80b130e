"""CKAN crawler (``ckan:https://portal``): Action API ``package_search`` paged by rows/start (1,000 a page by default,
CKAN's own ``ckan.search.rows_max``: a crawl of a large portal costs few round trips),
every tabular resource of every listed package becomes one dataset.

Incremental as Auctus does it: the package's ``metadata_modified`` is the change token (CKAN bumps
it on any edit of the package or its resources); an unchanged token means no download at all,
otherwise a conditional GET (a 304 is also unchanged) and ingestion's content hash decides.
Zipped CSVs are unpacked (the largest CSV member, within the size limit) and XLSX workbooks
become a CSV of their first sheet, so ingestion only ever sees csv, tsv, json or parquet.
"""

from __future__ import annotations

import csv
import datetime as dt
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from typing_extensions import override

from lakejoin.sources.base import Resource, Source, SourceUnavailable
from lakejoin.sources.http import (
    FetchError,
    HttpClient,
    HttpPolicy,
    conditional_validators,
    fetch_concurrently,
    guarded,
    local_download_path,
    metadata_unchanged,
)

TABLE_FORMATS = ("csv", "tsv", "json", "parquet", "xlsx", "zip")
_FORMAT_ALIASES = {
    "csv": "csv",
    "text/csv": "csv",
    "tsv": "tsv",
    "text/tab-separated-values": "tsv",
    "json": "json",
    "application/json": "json",
    "parquet": "parquet",
    "application/parquet": "parquet",
    "application/vnd.apache.parquet": "parquet",
    "xlsx": "xlsx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "zip": "zip",
    "application/zip": "zip",
    "csv.zip": "zip",
    "zipped csv": "zip",
}
# what the body of each declared format must sniff as (lakejoin.sources.http.sniff)
_EXPECTED_KIND = {
    "csv": {"text"},
    "tsv": {"text"},
    "json": {"json"},
    "parquet": {"parquet"},
    "xlsx": {"zip"},
    "zip": {"zip"},
}
# zip and xlsx resources reach ingestion as CSV
_DELIVERED = {"zip": "csv", "xlsx": "csv"}
_CSV_MEMBER_SUFFIXES = (".csv", ".tsv", ".txt")


def canonical_format(label: str | None, url: str) -> str | None:
    """The table format a CKAN resource declares (its ``format`` label, else its URL suffix)."""
    if label and label.strip():
        return _FORMAT_ALIASES.get(label.strip().lower().lstrip("."))
    suffixes = [s.lower() for s in PurePosixPath(urlsplit(url).path).suffixes]
    if suffixes[-2:] == [".csv", ".zip"]:
        return "zip"
    return _FORMAT_ALIASES.get(suffixes[-1].lstrip(".")) if suffixes else None


@dataclass(frozen=True)
class CkanListing:
    """One downloadable resource as the portal lists it."""

    dataset_id: str
    url: str
    title: str
    format: str
    publisher: str | None
    license: str | None
    metadata_modified: str | None


def portal_key(location: str) -> str:
    """``host[:port][/path]`` of a portal: the middle of every dataset id it yields."""
    parts = urlsplit(location)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"portal location {location!r} must be an http(s) URL")
    return parts.netloc.lower() + parts.path.rstrip("/")


def parse_package(package: Mapping[str, Any], key: str, formats: Sequence[str] = TABLE_FORMATS) -> list[CkanListing]:
    """The tabular resources of one ``package_search``/``package_show`` result."""
    if package.get("state", "active") != "active":
        return []
    organization = package.get("organization") or {}
    publisher = (
        organization.get("title") or organization.get("name") or package.get("author") or package.get("maintainer")
    )
    license_name = package.get("license_title") or package.get("license_id")
    resources = [r for r in package.get("resources") or [] if r.get("url") and r.get("state", "active") == "active"]
    listings = []
    for resource in resources:
        fmt = canonical_format(resource.get("format"), resource["url"])
        if fmt is None or fmt not in formats:
            continue
        title = package.get("title") or package.get("name") or package["id"]
        if len(resources) > 1:
            title = f"{title} / {resource.get('name') or resource['id']}"
        listings.append(
            CkanListing(
                dataset_id=f"ckan:{key}:{package['id']}:{resource['id']}",
                url=resource["url"],
                title=title,
                format=fmt,
                publisher=publisher,
                license=license_name,
                metadata_modified=package.get("metadata_modified"),
            )
        )
    return listings


def filter_query(organization: str | None, tag: str | None, res_format: str | None) -> str:
    """CKAN ``fq`` for the filters given (Solr field syntax)."""
    terms = [
        f'{name}:"{value}"'
        for name, value in (("organization", organization), ("tags", tag), ("res_format", res_format))
        if value
    ]
    return " AND ".join(terms)


class CkanSource(Source):
    """A CKAN portal; options are the filters below plus every HttpPolicy field."""

    def __init__(
        self,
        location: str,
        *,
        organization: str | None = None,
        tag: str | None = None,
        res_format: str | None = None,
        formats: Sequence[str] = TABLE_FORMATS,
        page_size: int = 1000,
        workers: int = 4,
        **http_options: Any,
    ) -> None:
        unknown = sorted(set(formats) - set(TABLE_FORMATS))
        if unknown:
            raise ValueError(f"unsupported CKAN format(s) {unknown}; expected some of {TABLE_FORMATS}")
        if not 1 <= page_size <= 1000:
            raise ValueError("page_size must lie in 1..1000 (CKAN's default row limit)")
        self.spec = f"ckan:{location}"
        self.location = location.rstrip("/")
        self.key = portal_key(location)
        self.fq = filter_query(organization, tag, res_format)
        self.formats = tuple(formats)
        self.page_size = page_size
        self.workers = workers
        self.client = HttpClient(HttpPolicy.from_options(http_options))

    def list_datasets(self) -> list[CkanListing]:
        """Every tabular resource, by paging ``package_search``; SourceUnavailable if any page fails."""
        listings: dict[str, CkanListing] = {}
        start, count = 0, None
        while count is None or start < count:
            params = {"q": "*:*", "rows": self.page_size, "start": start, "sort": "id asc"}
            if self.fq:
                params["fq"] = self.fq
            try:
                page = self.client.get_json(f"{self.location}/api/3/action/package_search", params)
                if not page.get("success"):
                    raise FetchError(f"CKAN error {page.get('error')}")
                count, results = int(page["result"]["count"]), page["result"]["results"]
                for package in results:
                    for listing in parse_package(package, self.key, self.formats):
                        listings.setdefault(listing.dataset_id, listing)
            except (FetchError, KeyError, TypeError, ValueError) as exc:
                raise SourceUnavailable(f"{self.spec}: package_search failed at start={start}: {exc}") from exc
            if not results:
                break
            start += len(results)
        return list(listings.values())

    @override
    def resources(self, previous: Mapping[str, Mapping[str, Any]], workdir: Path) -> Iterator[Resource]:
        listings = self.list_datasets()
        tasks = [self._task(listing, previous.get(listing.dataset_id), workdir) for listing in listings]
        yield from fetch_concurrently(tasks, self.workers)

    def _task(self, listing: CkanListing, stored: Mapping[str, Any] | None, workdir: Path) -> Callable[[], Resource]:
        resource = Resource(
            dataset_id=listing.dataset_id,
            source=self.spec,
            url=listing.url,
            title=listing.title,
            format=_DELIVERED.get(listing.format, listing.format),
            publisher=listing.publisher,
            license=listing.license,
            metadata_modified=listing.metadata_modified,
        )
        return lambda: guarded(resource, lambda: self._fetch(resource, listing.format, stored, workdir))

    def _fetch(self, resource: Resource, declared: str, stored: Mapping[str, Any] | None, workdir: Path) -> Resource:
        if metadata_unchanged(stored, resource.metadata_modified, resource.url):
            return replace(resource, unchanged=True, etag=stored.get("etag"), last_modified=stored.get("last_modified"))
        raw = local_download_path(workdir, resource.dataset_id, ".download")
        got = self.client.download(resource.url, raw, **conditional_validators(stored, resource.url))
        fetched = replace(resource, etag=got.etag, last_modified=got.last_modified)
        if got.not_modified:
            return replace(fetched, unchanged=True)
        if got.kind not in _EXPECTED_KIND[declared]:
            raw.unlink()
            raise FetchError(f"body looks like {got.kind} ({got.content_type}), not {declared}")
        return replace(fetched, local_path=self._as_table_file(raw, declared, resource))

    def _as_table_file(self, raw: Path, declared: str, resource: Resource) -> Path:
        """Give ingestion a csv/tsv/json/parquet file named after the dataset id's hash."""
        target = local_download_path(raw.parent, resource.dataset_id, f".{resource.format}")
        try:
            if declared == "zip":
                extract_csv_member(raw, target, self.client.policy.max_bytes)
            elif declared == "xlsx":
                xlsx_first_sheet_to_csv(raw, target, self.client.policy.max_bytes)
            else:
                raw.replace(target)
            return target
        finally:
            raw.unlink(missing_ok=True)


def _checked_members(archive: zipfile.ZipFile, max_bytes: int) -> list[zipfile.ZipInfo]:
    """Members of an archive whose declared sizes stay within the limit (zipfile never
    inflates a member past its declared size, so this bounds decompression)."""
    members = [info for info in archive.infolist() if not info.is_dir()]
    total = sum(info.file_size for info in members)
    if total > max_bytes:
        raise FetchError(f"archive inflates to {total} bytes, limit {max_bytes}")
    return members


def extract_csv_member(archive_path: Path, dest: Path, max_bytes: int) -> None:
    """Copy the largest CSV/TSV/TXT member of a zip to ``dest`` (member names are never paths)."""
    try:
        with zipfile.ZipFile(archive_path) as archive:
            tables = [
                info
                for info in _checked_members(archive, max_bytes)
                if info.filename.lower().endswith(_CSV_MEMBER_SUFFIXES)
                and not PurePosixPath(info.filename).name.startswith(".")
                and "__MACOSX" not in info.filename
            ]
            if not tables:
                raise FetchError("zip archive holds no CSV file")
            member = max(tables, key=lambda info: (info.file_size, info.filename))
            with archive.open(member) as source, dest.open("wb") as out:
                while chunk := source.read(1 << 20):
                    out.write(chunk)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, RuntimeError, EOFError) as exc:
        dest.unlink(missing_ok=True)
        raise FetchError(f"unreadable zip archive: {exc}") from None


def xlsx_first_sheet_to_csv(workbook_path: Path, dest: Path, max_bytes: int) -> None:
    """Write the first worksheet as CSV (values, not formulas); needs openpyxl."""
    try:
        import openpyxl
    except ImportError:
        raise FetchError("XLSX resources need openpyxl (pip install openpyxl)") from None
    with workbook_path.open("rb") as handle:  # a handle: openpyxl would judge a path by its suffix
        try:
            with zipfile.ZipFile(handle) as archive:
                _checked_members(archive, max_bytes)
            workbook = openpyxl.load_workbook(handle, read_only=True, data_only=True)
        except (zipfile.BadZipFile, OSError, KeyError, ValueError) as exc:
            raise FetchError(f"unreadable XLSX workbook: {exc}") from None
        try:
            if not workbook.worksheets:
                raise FetchError("XLSX workbook has no worksheet")
            with dest.open("w", newline="", encoding="utf-8") as out:
                writer = csv.writer(out)
                for row in workbook.worksheets[0].iter_rows(values_only=True):
                    writer.writerow(
                        ["" if v is None else v.isoformat() if isinstance(v, dt.date | dt.time) else v for v in row]
                    )
        finally:
            workbook.close()
