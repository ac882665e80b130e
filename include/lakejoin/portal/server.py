"""HTTP handler speaking CKAN's Action API and Socrata's Discovery API + SODA CSV export.

CKAN: ``/api/3/action/{package_search,package_show,package_list,organization_list,resource_show}``
(also unversioned ``/api/action/``; GET or POST, JSON or form body) with the ``{"help", "success", "result"}`` envelope
and CKAN's
error shape and status codes; resource files at ``/dataset/<name>/resource/<id>/download/<file>``.
Socrata: ``/api/catalog/v1`` (limit/offset) and ``/resource/<4x4>.csv`` ($limit/$offset).
Downloads carry ETag/Last-Modified and answer conditional requests with 304.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import random
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qs, quote, urlsplit

from typing_extensions import override

from lakejoin.portal.catalog import MIME_TYPES, SOCRATA_FORMATS, Catalog, RowIndexCache, Table, slug

SODA_DEFAULT_LIMIT = 1000
CKAN_MAX_ROWS = 1000
LICENSE = ("cc-by", "Creative Commons Attribution")
HTML_ERROR_PAGE = (
    b"<!DOCTYPE html><html><head><title>Service Unavailable</title></head><body><h1>Maintenance</h1></body></html>"
)
_ACTION_PATH = re.compile(r"^/api/(3/)?action/\w+$")
_FQ_TERM = re.compile(r'\+?(\w+):("[^"]*"|\S+)')


@dataclass(frozen=True)
class Faults:
    """Faults the portal injects, for tests. Rates apply to every request (API and data); the
    name sets hold table paths relative to the root (e.g. ``"datasets/iris.csv"``) and apply to
    that table's downloads and exports."""

    latency_s: float = 0.0
    error_rate: float = 0.0
    rate_limit_rate: float = 0.0
    retry_after_s: int = 1
    truncate: frozenset[str] = frozenset()
    html: frozenset[str] = frozenset()
    wrong_type: frozenset[str] = frozenset()
    oversize: frozenset[str] = frozenset()
    oversize_bytes: int = 64 * 2**20
    seed: int = 0

    def __post_init__(self) -> None:
        if not (0 <= self.error_rate <= 1 and 0 <= self.rate_limit_rate <= 1):
            raise ValueError("fault rates must lie in [0, 1]")
        for name in ("truncate", "html", "wrong_type", "oversize"):
            object.__setattr__(self, name, frozenset(getattr(self, name)))


class _CkanError(Exception):
    def __init__(self, status: int, kind: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.status, self.kind, self.message, self.details = status, kind, message, details


@dataclass
class PortalState:
    """What every request shares: the folder, faults, caches, counters."""

    catalog: Catalog
    faults: Faults
    rows: RowIndexCache
    stats: Counter = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _attempts: Counter = field(default_factory=Counter)

    def count(self, key: str) -> None:
        """Count one more ``key`` (a request, a served body, a fault) in :attr:`stats`."""
        with self.lock:
            self.stats[key] += 1

    def roll(self, key: str) -> float:
        """A deterministic uniform draw per (seed, key, n-th request for key)."""
        with self.lock:
            self._attempts[key] += 1
            n = self._attempts[key]
        return random.Random(f"{self.faults.seed}:{key}:{n}").random()


class PortalHandler(BaseHTTPRequestHandler):
    """Answers the CKAN and Socrata API routes and the table downloads, with the configured faults."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as separate writes on keep-alive
    server_version = "LakejoinPortal/0.1"
    state: PortalState  # set on the subclass made per server

    @override
    def log_message(self, format: str, *args: Any) -> None:
        pass  # silent: the default writes a line to stderr per request and per error

    # -- dispatch -----------------------------------------------------------------------------

    def do_GET(self) -> None:
        """Answer a GET (``BaseHTTPRequestHandler`` calls ``do_<method>``): every route takes one."""
        self._dispatch(body=b"")

    def do_POST(self) -> None:
        """Answer a POST: its body holds CKAN action parameters (JSON or a form), which win over the query
        string's."""
        length = int(self.headers.get("Content-Length") or 0)
        self._dispatch(body=self.rfile.read(length))

    def _dispatch(self, body: bytes) -> None:
        self.state.count("requests")
        parts = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        if self._injected_fault(parts.path):
            return
        path = parts.path
        if _ACTION_PATH.match(path):
            self._ckan_action(path.rsplit("/", 1)[1], {**query, **_body_params(self.headers, body)})
        elif path.startswith("/dataset/") and "/download/" in path:
            self._download(path.split("/")[4] if len(path.split("/")) > 4 else "")
        elif path.rstrip("/") == "/api/catalog/v1":
            self._socrata_catalog(query)
        elif path.startswith("/resource/") and path.endswith(".csv"):
            self._socrata_export(path.removeprefix("/resource/").removesuffix(".csv"), query)
        elif path == "/redirect":
            # test hook for redirect safety: a portal link that points somewhere else
            self._send(302, b"", "text/plain", {"Location": query.get("to", "/")})
        else:
            self._send_json(404, {"error": "not found", "path": path})

    def _injected_fault(self, key: str) -> bool:
        faults = self.state.faults
        if faults.latency_s:
            time.sleep(faults.latency_s)
        draw = self.state.roll(key) if (faults.error_rate or faults.rate_limit_rate) else 1.0
        if draw < faults.error_rate:
            self.state.count("fault_500")
            self._send(500, HTML_ERROR_PAGE, "text/html")
            return True
        if draw < faults.error_rate + faults.rate_limit_rate:
            self.state.count("fault_429")
            self._send(
                429, b'{"error": "too many requests"}', "application/json", {"Retry-After": str(faults.retry_after_s)}
            )
            return True
        return False

    # -- responses ----------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The portal's URL as the client reached it (its ``Host`` header, else the bound address), for the
        links in responses."""
        host, port = cast(tuple[str, int], self.server.server_address)[:2]
        return f"http://{self.headers.get('Host') or f'{host}:{port}'}"

    def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _send_json(self, status: int, document: Any) -> None:
        self._send(status, json.dumps(document).encode(), "application/json;charset=utf-8")

    def _not_modified(self, etag: str, modified: Table) -> bool:
        """RFC 9110: If-None-Match decides when present, else If-Modified-Since."""
        if_none_match = self.headers.get("If-None-Match")
        if if_none_match is not None:
            return etag in {tag.strip() for tag in if_none_match.split(",")} or if_none_match.strip() == "*"
        since = self.headers.get("If-Modified-Since")
        if since:
            try:
                return modified.mtime_ns // 10**9 <= parsedate_to_datetime(since).timestamp()
            except (TypeError, ValueError):
                return False
        return False

    def _send_table_bytes(self, table: Table, etag: str, content_type: str, produce: Callable[[], bytes]) -> None:
        """Serve a table body with validators, 304s and the per-table faults."""
        faults = self.state.faults
        validators = {"ETag": etag, "Last-Modified": table.http_date}
        if self._not_modified(etag, table):
            self.state.count("not_modified")
            self.send_response(304)
            for name, value in validators.items():
                self.send_header(name, value)
            self.end_headers()
            return
        self.state.count("bodies")
        if table.relpath in faults.html:
            self._send(200, HTML_ERROR_PAGE, "text/html; charset=utf-8")
            return
        body = produce()
        if table.relpath in faults.wrong_type:
            content_type = "text/html; charset=utf-8"
        if table.relpath in faults.oversize:
            self._stream_oversized(body, content_type)
        elif table.relpath in faults.truncate:
            self._send_truncated(body, content_type, validators)
        else:
            self._send(200, body, content_type, validators)

    def _stream_oversized(self, body: bytes, content_type: str) -> None:
        """No Content-Length, body repeated until ``oversize_bytes``: only a streaming limit stops it."""
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Connection", "close")
        self.end_headers()
        sent, chunk = 0, (body or b"x\n") * max(1, 65536 // max(1, len(body)))
        try:
            while sent < self.state.faults.oversize_bytes:
                self.wfile.write(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _send_truncated(self, body: bytes, content_type: str, headers: dict[str, str]) -> None:
        """Promise the whole body, deliver half, hang up."""
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body[: len(body) // 2])

    # -- lookup -------------------------------------------------------------------------------

    def _tables(self) -> list[Table]:
        return self.state.catalog.tables()

    def _table_by(self, attribute: str, value: str) -> Table | None:
        return self.state.catalog.find(attribute, value)

    # -- CKAN ---------------------------------------------------------------------------------

    def _ckan_action(self, action: str, params: dict[str, Any]) -> None:
        self.state.count("api")
        actions = {
            "package_search": self._package_search,
            "package_show": self._package_show,
            "package_list": lambda p: [t.name for t in self._tables()],
            "organization_list": lambda p: sorted({t.organization for t in self._tables()}),
            "resource_show": self._resource_show,
        }
        help_url = f"{self.base_url}/api/3/action/help_show?name={action}"
        try:
            if action not in actions:
                raise _CkanError(400, "Bad Request", f"Bad request - Action name not known: {action}")
            result = actions[action](params)
        except _CkanError as error:
            payload = {"__type": error.kind, "message": error.message, **error.details}
            self._send_json(error.status, {"help": help_url, "success": False, "error": payload})
            return
        self._send_json(200, {"help": help_url, "success": True, "result": result})

    def _package(self, table: Table) -> dict[str, Any]:
        modified = table.modified.strftime("%Y-%m-%dT%H:%M:%S.%f")
        org = table.organization
        organization = {
            "id": str(hashlib.md5(org.encode()).hexdigest()),
            "name": org,
            "title": org,
            "type": "organization",
            "is_organization": True,
            "state": "active",
            "approval_status": "approved",
        }
        resource_file = Path(table.relpath).name
        resource = {
            "id": table.resource_id,
            "package_id": table.package_id,
            "name": resource_file,
            "format": table.format,
            "mimetype": MIME_TYPES[table.format],
            "url": f"{self.base_url}/dataset/{table.name}/resource/{table.resource_id}/download/{quote(resource_file)}",
            "url_type": "upload",
            "size": table.size,
            "created": modified,
            "last_modified": modified,
            "metadata_modified": modified,
            "state": "active",
            "position": 0,
        }
        tags = [
            {"name": name, "display_name": name, "state": "active", "vocabulary_id": None}
            for name in (org, table.format.lower())
        ]
        return {
            "id": table.package_id,
            "name": table.name,
            "title": table.title,
            "type": "dataset",
            "state": "active",
            "private": False,
            "notes": f"{table.relpath}, served by the lakejoin local portal",
            "license_id": LICENSE[0],
            "license_title": LICENSE[1],
            "isopen": True,
            "metadata_created": modified,
            "metadata_modified": modified,
            "organization": organization,
            "owner_org": organization["id"],
            "author": None,
            "maintainer": None,
            "tags": tags,
            "num_tags": len(tags),
            "groups": [],
            "extras": [],
            "resources": [resource],
            "num_resources": 1,
        }

    def _package_search(self, params: dict[str, Any]) -> dict[str, Any]:
        rows, start = _int_param(params, "rows", 10), _int_param(params, "start", 0)
        if rows > CKAN_MAX_ROWS:
            raise _CkanError(
                409, "Validation Error", "Validation Error", rows=[f"Must be less than or equal to {CKAN_MAX_ROWS}"]
            )
        sort = str(params.get("sort") or "metadata_modified desc")
        key, _, direction = sort.partition(" ")
        if key not in _SORT_KEYS:
            raise _CkanError(409, "Search Query Error", f"Search Query is invalid: cannot sort by {key!r}")
        fq, q = str(params.get("fq") or ""), str(params.get("q") or "")
        # Package documents are built for the page only unless a filter must read them: a crawl
        # pages through the whole portal, and building every document per page is quadratic.
        tables = self._tables()
        if fq or not _matches_q_all(q):
            tables = [t for t in tables if _matches_fq(package := self._package(t), fq) and _matches_q(package, q)]
        tables.sort(key=_SORT_KEYS[key], reverse=direction.strip().lower() == "desc")
        page = [self._package(t) for t in tables[start : start + rows]]
        return {"count": len(tables), "sort": sort, "facets": {}, "results": page, "search_facets": {}}

    def _package_show(self, params: dict[str, Any]) -> dict[str, Any]:
        wanted = str(params.get("id") or "")
        table = self._table_by("package_id", wanted) or self._table_by("name", wanted)
        if table is None:
            raise _CkanError(404, "Not Found Error", "Not found")
        return self._package(table)

    def _resource_show(self, params: dict[str, Any]) -> dict[str, Any]:
        table = self._table_by("resource_id", str(params.get("id") or ""))
        if table is None:
            raise _CkanError(404, "Not Found Error", "Not found: Resource was not found.")
        return self._package(table)["resources"][0]

    def _download(self, resource_id: str) -> None:
        table = self._table_by("resource_id", resource_id)
        if table is None:
            self._send(404, b"Not found", "text/plain")
            return
        self._send_table_bytes(table, table.etag, MIME_TYPES[table.format], table.path.read_bytes)

    # -- Socrata ------------------------------------------------------------------------------

    def _socrata_tables(self) -> list[Table]:
        return [t for t in self._tables() if t.format in SOCRATA_FORMATS]

    def _socrata_catalog(self, query: dict[str, str]) -> None:
        self.state.count("api")
        try:
            limit, offset = _int_param(query, "limit", 10), _int_param(query, "offset", 0)
        except _CkanError as error:
            self._send_json(400, {"error": error.message})
            return
        tables = self._socrata_tables()
        host = urlsplit(self.base_url).hostname
        results = [self._socrata_entry(t, host) for t in tables[offset : offset + limit]]
        self._send_json(
            200,
            {"results": results, "resultSetSize": len(tables), "timings": {"serviceMillis": 1, "searchMillis": [0, 0]}},
        )

    def _socrata_entry(self, table: Table, host: str | None) -> dict[str, Any]:
        stamp = table.modified.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        header = next(csv.reader(io.StringIO(self.state.rows.get(table).header().decode("utf-8", "replace"))))
        org = table.organization
        return {
            "resource": {
                "name": table.title,
                "id": table.socrata_id,
                "parent_fxf": None,
                "description": f"{table.relpath}, served by the lakejoin local portal",
                "attribution": org,
                "type": "dataset",
                "updatedAt": stamp,
                "createdAt": stamp,
                "data_updated_at": stamp,
                "metadata_updated_at": stamp,
                "columns_name": header,
                "columns_field_name": [slug(name).replace("-", "_") for name in header],
            },
            "classification": {"categories": [], "tags": [], "domain_category": org, "domain_tags": [org]},
            "metadata": {"domain": host, "license": LICENSE[1]},
            "permalink": f"{self.base_url}/d/{table.socrata_id}",
            "link": f"{self.base_url}/{org}/{table.name}/{table.socrata_id}",
            "owner": {"id": table.socrata_id, "display_name": org},
        }

    def _socrata_export(self, four_by_four: str, query: dict[str, str]) -> None:
        table = self._table_by("socrata_id", four_by_four)
        if table is None or table.format not in SOCRATA_FORMATS:
            self._send_json(404, {"code": "not_found", "error": True, "message": f"Dataset {four_by_four} not found"})
            return
        try:
            limit, offset = _int_param(query, "$limit", SODA_DEFAULT_LIMIT), _int_param(query, "$offset", 0)
        except _CkanError as error:
            self._send_json(400, {"code": "query.soql.invalid", "error": True, "message": error.message})
            return
        etag = f'"{hashlib.sha1(f"{table.etag}:{offset}:{limit}".encode()).hexdigest()}"'
        self._send_table_bytes(
            table, etag, "text/csv; charset=UTF-8", lambda: self.state.rows.get(table).page(offset, limit)
        )


_SORT_KEYS: dict[str, Callable[[Table], Any]] = {
    "id": lambda t: t.package_id,
    "name": lambda t: t.name,
    "title": lambda t: t.title,
    "metadata_modified": lambda t: t.modified,
}


def _body_params(headers: Any, body: bytes) -> dict[str, Any]:
    if not body:
        return {}
    if "json" in (headers.get("Content-Type") or ""):
        document = json.loads(body or b"{}")
        return document if isinstance(document, dict) else {}
    return {k: v[-1] for k, v in parse_qs(body.decode()).items()}


def _int_param(params: dict[str, Any], name: str, default: int) -> int:
    value = params.get(name, default)
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = -1
    if number < 0:
        raise _CkanError(409, "Validation Error", "Validation Error", **{name: ["Invalid integer"]})
    return number


def _package_field(package: dict[str, Any], name: str) -> set[str]:
    """The values Solr indexes for a package under the field names CKAN's fq uses."""
    if name == "organization":
        return {package["organization"]["name"]}
    if name == "tags":
        return {tag["name"] for tag in package["tags"]}
    if name == "res_format":
        return {r["format"] for r in package["resources"]}
    if name in ("id", "name", "title", "license_id"):
        return {str(package[name])}
    raise _CkanError(409, "Search Query Error", f"Search Query is invalid: unknown field {name!r}")


def _matches_fq(package: dict[str, Any], fq: str) -> bool:
    """Conjunction of ``field:value`` terms (quotes optional, case-insensitive values)."""
    return all(
        value.strip('"').lower() in {v.lower() for v in _package_field(package, name)}
        for name, value in _FQ_TERM.findall(fq)
    )


def _matches_q_all(q: str) -> bool:
    return q.strip() in ("", "*:*")


def _matches_q(package: dict[str, Any], q: str) -> bool:
    if _matches_q_all(q):
        return True
    text = f"{package['name']} {package['title']} {package['notes']}".lower()
    return all(word in text for word in q.lower().split())


class PortalHTTPServer(ThreadingHTTPServer):
    """The portal's threaded server; a client that hangs up mid-response is not an error of the portal."""

    daemon_threads = True

    @override
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that refuses a download (too large for its --max-bytes) closes the connection while the
        # body is sent: a broken pipe here, not a traceback on the run's stderr.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def make_server(
    root: Path, host: str, port: int, faults: Faults, cache_dir: Path
) -> tuple[ThreadingHTTPServer, PortalState]:
    """A threaded HTTP server for the portal over ``root`` (not yet serving), and its state."""
    state = PortalState(catalog=Catalog(root), faults=faults, rows=RowIndexCache(cache_dir))
    handler = type("BoundPortalHandler", (PortalHandler,), {"state": state})
    server = PortalHTTPServer((host, port), handler)
    return server, state
