"""The one HTTP client every portal crawler uses: safe, polite and bounded.

Safe: only http/https; every host (the first and every redirect hop) must resolve to public
addresses unless ``allow_private_hosts`` (or an ``allowed_networks`` CIDR) says otherwise, and the
connected peer is checked again so DNS rebinding cannot slip through.
Polite: per-host concurrency and request-rate limits; a 429/503 with Retry-After pauses the whole
host, not just the request that got it.
Robust: timeouts, retries with exponential backoff and jitter on 429/5xx/timeouts/truncated
bodies, a byte limit enforced while streaming (on decoded bytes, so it doubles as the
decompression limit), and content sniffing so an HTML error page is never handed on as a table.
"""

from __future__ import annotations

import email.utils
import hashlib
import ipaddress
import json
import random
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, TypedDict, TypeGuard
from urllib.parse import urljoin, urlsplit

import requests

from lakejoin.sources.base import Resource

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
CHUNK = 64 * 1024
_SNIFF_BYTES = 512


class FetchError(Exception):
    """A request failed for good; ``str(error)`` is the reason recorded for the dataset."""


class UnsafeUrl(FetchError):
    """The URL breaks the address-safety rules (scheme, private host, redirect target)."""


class _Transient(Exception):
    """A failure worth retrying (429, 5xx, timeout, truncated body)."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


@dataclass(frozen=True)
class HttpPolicy:
    """Every knob of the client; sources accept these names as keyword options."""

    allow_private_hosts: bool = False
    allowed_networks: tuple[str, ...] = ()
    max_bytes: int = 512 * 2**20
    max_api_bytes: int = 64 * 2**20
    connect_timeout_s: float = 10.0
    timeout_s: float = 60.0
    max_retries: int = 4
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    max_retry_after_s: float = 300.0
    requests_per_second: float = 5.0
    per_host_concurrency: int = 4
    max_redirects: int = 5
    user_agent: str = "lakejoin-crawler/0.1 (open-data join discovery)"

    def __post_init__(self) -> None:
        if self.max_bytes <= 0 or self.max_api_bytes <= 0:
            raise ValueError("max_bytes and max_api_bytes must be positive")
        if self.per_host_concurrency < 1:
            raise ValueError("per_host_concurrency must be at least 1")
        if self.max_retries < 0 or self.requests_per_second < 0:
            raise ValueError("max_retries and requests_per_second must not be negative")
        object.__setattr__(self, "allowed_networks", tuple(self.allowed_networks))
        for network in self.allowed_networks:
            ipaddress.ip_network(network, strict=False)

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> HttpPolicy:
        """Build a policy from source options; unknown names are an error, not silently ignored."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ValueError(f"unknown option(s) {', '.join(unknown)}; expected some of {', '.join(sorted(known))}")
        return cls(**options)


@dataclass
class Download:
    """Outcome of a conditional download: ``not_modified`` (304) or a file at ``path``."""

    url: str
    not_modified: bool
    path: Path | None = None
    size: int = 0
    kind: str | None = None
    content_type: str | None = None
    etag: str | None = None
    last_modified: str | None = None


def sniff(head: bytes) -> str:
    """What the first bytes of a body look like: parquet, zip, gzip, html, xml, json, binary, text."""
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith(b"PK\x03\x04"):
        return "zip"
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if text.startswith((b"<!doctype html", b"<html", b"<head", b"<body", b"<!--")):
        return "html"
    if text.startswith(b"<"):
        return "xml"
    if text.startswith((b"{", b"[")):
        return "json"
    if b"\x00" in head:
        return "binary"
    return "text"


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date), None if absent."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def backoff_delay(attempt: int, policy: HttpPolicy, retry_after: float | None, rng: random.Random) -> float:
    """Delay before retry ``attempt`` (0-based): the server's Retry-After when it gave one,
    else exponential backoff with equal jitter, capped at ``backoff_max_s``."""
    if retry_after is not None:
        if retry_after > policy.max_retry_after_s:
            raise FetchError(f"server asked to retry after {retry_after:.0f}s (limit {policy.max_retry_after_s:.0f}s)")
        return retry_after
    ceiling = min(policy.backoff_max_s, policy.backoff_base_s * 2**attempt)
    return ceiling / 2 + rng.uniform(0, ceiling / 2)


class _HostGate:
    """Per-host politeness: at most ``concurrency`` requests in flight, starts spaced by the rate
    limit, and a shared pause when the host says Retry-After."""

    def __init__(self, concurrency: int, requests_per_second: float) -> None:
        self._slots = threading.BoundedSemaphore(concurrency)
        self._lock = threading.Lock()
        self._interval = 1.0 / requests_per_second if requests_per_second > 0 else 0.0
        self._next_start = 0.0

    def pause(self, seconds: float) -> None:
        with self._lock:
            self._next_start = max(self._next_start, time.monotonic() + seconds)

    @contextmanager
    def slot(self) -> Iterator[None]:
        with self._slots:
            with self._lock:
                now = time.monotonic()
                start = max(now, self._next_start)
                self._next_start = start + self._interval
            if start > now:
                time.sleep(start - now)
            yield


class HttpClient:
    """Thread-safe client; one per crawl. ``get_json`` for APIs, ``download`` for bodies."""

    def __init__(self, policy: HttpPolicy | None = None, *, seed: int | None = None) -> None:
        self.policy = policy or HttpPolicy()
        self._networks = [ipaddress.ip_network(n, strict=False) for n in self.policy.allowed_networks]
        self._gates: dict[str, _HostGate] = {}
        self._gates_lock = threading.Lock()
        self._rng = random.Random(seed)
        self._local = threading.local()

    # -- safety -------------------------------------------------------------------------------

    def address_allowed(self, address: str) -> bool:
        """Public unicast addresses always; private, loopback, link-local and the like only with
        ``allow_private_hosts`` or inside an ``allowed_networks`` CIDR."""
        ip = ipaddress.ip_address(address.split("%", 1)[0])
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
            ip = ip.ipv4_mapped
        if self.policy.allow_private_hosts or any(ip in net for net in self._networks):
            return True
        return ip.is_global and not ip.is_multicast

    def check_url(self, url: str) -> None:
        """Raise UnsafeUrl unless ``url`` is http(s) to a host whose every address is allowed."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise UnsafeUrl(f"refused scheme {parts.scheme or '(none)'!r} in {url!r}: only http and https")
        if not parts.hostname:
            raise UnsafeUrl(f"refused {url!r}: no host")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
            infos = socket.getaddrinfo(parts.hostname, port, proto=socket.IPPROTO_TCP)
        except (socket.gaierror, ValueError) as exc:
            raise FetchError(f"cannot resolve {parts.hostname!r}: {exc}") from exc
        for info in infos:
            address = str(info[4][0])
            if not self.address_allowed(address):
                raise UnsafeUrl(
                    f"refused {parts.hostname!r}: it resolves to non-public address {address} (set "
                    "allow_private_hosts to crawl private networks)"
                )

    def _check_peer(self, response: requests.Response) -> None:
        """Re-check the address actually connected to (closes the DNS-rebinding gap)."""
        connection = getattr(response.raw, "connection", None) or getattr(response.raw, "_connection", None)
        sock = getattr(connection, "sock", None)
        if sock is None:
            return
        try:
            peer = sock.getpeername()[0]
        except OSError:
            return
        if not self.address_allowed(str(peer)):
            raise UnsafeUrl(f"refused connection to non-public address {peer}")

    # -- politeness ---------------------------------------------------------------------------

    def _gate(self, url: str) -> _HostGate:
        parts = urlsplit(url)
        key = f"{parts.scheme}://{parts.netloc}".lower()
        with self._gates_lock:
            if key not in self._gates:
                self._gates[key] = _HostGate(self.policy.per_host_concurrency, self.policy.requests_per_second)
            return self._gates[key]

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            session.trust_env = False  # no proxies or netrc from the environment
            session.headers.update({"User-Agent": self.policy.user_agent, "Accept-Encoding": "gzip, deflate"})
            self._local.session = session
        return session

    # -- requests -----------------------------------------------------------------------------

    def _with_retries(self, url: str, attempt: Callable[[], Any]) -> Any:
        for number in range(self.policy.max_retries + 1):
            try:
                return attempt()
            except _Transient as exc:
                if number == self.policy.max_retries:
                    raise FetchError(f"{exc.reason} (gave up after {number + 1} attempts)") from None
                delay = backoff_delay(number, self.policy, exc.retry_after, self._rng)
                if exc.retry_after is not None:
                    self._gate(url).pause(delay)
                time.sleep(delay)
        raise AssertionError("unreachable")

    @contextmanager
    def _open(
        self, url: str, params: Mapping[str, Any] | None, headers: Mapping[str, str]
    ) -> Iterator[requests.Response]:
        """One attempt: follow redirects by hand, checking every hop; yield the final response."""
        timeout = (self.policy.connect_timeout_s, self.policy.timeout_s)
        for _hop in range(self.policy.max_redirects + 1):
            self.check_url(url)
            with self._gate(url).slot():
                try:
                    response = self._session().get(
                        url, params=params, headers=dict(headers), timeout=timeout, stream=True, allow_redirects=False
                    )
                except requests.Timeout as exc:
                    raise _Transient(f"timeout: {exc.__class__.__name__}") from None
                except requests.ConnectionError as exc:
                    raise _Transient(f"connection failed: {exc.__class__.__name__}") from None
                except requests.RequestException as exc:
                    raise FetchError(f"request failed: {exc}") from None
                try:
                    self._check_peer(response)
                    location = response.headers.get("Location")
                    if response.status_code in REDIRECT_STATUSES and location:
                        url, params = urljoin(response.url, location), None
                        continue
                    _raise_for_status(response)
                    yield response
                    return
                finally:
                    response.close()
        raise FetchError(f"too many redirects (more than {self.policy.max_redirects})")

    def get_json(self, url: str, params: Mapping[str, Any] | None = None) -> Any:
        """GET a JSON document (an API page), bounded by ``max_api_bytes``."""

        def attempt() -> Any:
            with self._open(url, params, {"Accept": "application/json"}) as response:
                body = b"".join(_stream(response, self.policy.max_api_bytes))
            try:
                return json.loads(body)
            except ValueError as exc:
                raise FetchError(f"invalid JSON from {url}: {exc}") from None

        return self._with_retries(url, attempt)

    def download(
        self,
        url: str,
        dest: Path,
        *,
        params: Mapping[str, Any] | None = None,
        etag: str | None = None,
        last_modified: str | None = None,
        max_bytes: int | None = None,
    ) -> Download:
        """Conditionally GET ``url`` into ``dest`` (written whole or not at all)."""
        limit = max_bytes or self.policy.max_bytes
        headers = {"Accept": "*/*"}
        if etag:
            headers["If-None-Match"] = etag
        if last_modified:
            headers["If-Modified-Since"] = last_modified
        partial = dest.with_name(dest.name + ".part")

        def attempt() -> Download:
            with self._open(url, params, headers) as response:
                found = Download(
                    url=response.url,
                    not_modified=response.status_code == 304,
                    content_type=response.headers.get("Content-Type"),
                    etag=response.headers.get("ETag") or etag,
                    last_modified=response.headers.get("Last-Modified") or last_modified,
                )
                if found.not_modified:
                    return found
                head = b""
                with partial.open("wb") as out:
                    for chunk in _stream(response, limit):
                        if len(head) < _SNIFF_BYTES:
                            head += chunk[: _SNIFF_BYTES - len(head)]
                        out.write(chunk)
                        found.size += len(chunk)
            found.kind = sniff(head)
            partial.replace(dest)
            found.path = dest
            return found

        try:
            return self._with_retries(url, attempt)
        finally:
            partial.unlink(missing_ok=True)


def _raise_for_status(response: requests.Response) -> None:
    code = response.status_code
    if code in RETRY_STATUSES:
        raise _Transient(f"HTTP {code}", parse_retry_after(response.headers.get("Retry-After")))
    if code >= 400:
        raise FetchError(f"HTTP {code} {response.reason or ''}".strip())


def _stream(response: requests.Response, limit: int) -> Iterator[bytes]:
    """Yield decoded body chunks, refusing more than ``limit`` bytes (declared or streamed) and
    turning a connection that drops mid-body into a retryable failure."""
    declared = response.headers.get("Content-Length")
    encoded = response.headers.get("Content-Encoding", "identity").lower() not in ("", "identity")
    if declared and declared.isdigit() and not encoded and int(declared) > limit:
        raise FetchError(f"too large: {int(declared)} bytes declared, limit {limit}")
    total = 0
    try:
        for chunk in response.iter_content(CHUNK):
            total += len(chunk)
            if total > limit:
                raise FetchError(f"too large: more than {limit} bytes")
            yield chunk
    except (requests.exceptions.ChunkedEncodingError, requests.exceptions.ConnectionError) as exc:
        # requests reports both a short body and a read timeout mid-body this way
        raise _Transient(f"truncated body after {total} bytes ({exc.__class__.__name__})") from None
    except requests.exceptions.ContentDecodingError as exc:
        raise FetchError(f"undecodable body: {exc}") from None


# -- pieces every portal crawler shares ---------------------------------------------------------


def local_download_path(workdir: Path, dataset_id: str, suffix: str) -> Path:
    """Where a dataset's download goes: named by a hash of its id, so names and paths that
    portals supply never become file-system paths."""
    digest = hashlib.sha256(dataset_id.encode()).hexdigest()[:40]
    workdir.mkdir(parents=True, exist_ok=True)
    return workdir / f"{digest}{suffix}"


def metadata_unchanged(previous: Mapping[str, Any] | None, token: str | None, url: str) -> TypeGuard[Mapping[str, Any]]:
    """True when the stored row has the same portal change token (and, if stored, the same URL):
    the dataset is not downloaded again."""
    if not previous or not token:
        return False
    stored_url = previous.get("url")
    return previous.get("metadata_modified") == token and (not stored_url or stored_url == url)


class Validators(TypedDict):
    """The stored version's ETag and Last-Modified, sent back to ask whether it changed."""

    etag: str | None
    last_modified: str | None


def conditional_validators(previous: Mapping[str, Any] | None, url: str) -> Validators:
    """ETag / Last-Modified of the stored version, for If-None-Match / If-Modified-Since."""
    if not previous or (previous.get("url") and previous.get("url") != url):
        return {"etag": None, "last_modified": None}
    return {"etag": previous.get("etag"), "last_modified": previous.get("last_modified")}


def guarded(resource: Resource, fetch: Callable[[], Resource]) -> Resource:
    """Run one dataset's fetch; any failure becomes that dataset's ``error``, never the crawl's."""
    try:
        return fetch()
    except FetchError as exc:
        return replace(resource, error=str(exc))
    except Exception as exc:  # noqa: BLE001 - one bad dataset must not stop the crawl
        return replace(resource, error=f"{exc.__class__.__name__}: {exc}")


def fetch_concurrently(tasks: Iterable[Callable[[], Resource]], workers: int) -> Iterator[Resource]:
    """Run fetch tasks on ``workers`` threads (hosts still get their own politeness limits) and
    yield each Resource as it finishes."""
    if workers < 1:
        raise ValueError("workers must be at least 1")
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="lakejoin-fetch")
    try:
        futures = [pool.submit(task) for task in tasks]
        for future in as_completed(futures):
            yield future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
