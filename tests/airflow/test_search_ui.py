"""The search page driven in headless Chromium (Selenium + chromedriver) against the real API server,
signed in as the Airflow UI is; each test saves a screenshot in its ``tmp_path``.

Needs Debian's ``chromium`` and ``chromium-driver`` (``apt-get install -y chromium chromium-driver``)
and ``selenium`` in the venv; skipped when they are missing.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
from testkit.api_server import MAX_UPLOAD_BYTES, ApiServer
from testkit.browser import check_columns, choose_table, screenshot, search, signed_in_chromium, wait_for, wait_for_text

from lakejoin.query import QueryEngine

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

CHALLENGES = "bakeoff_challenges.csv"


@pytest.fixture(scope="module")
def browser(api_server: ApiServer):
    driver = signed_in_chromium(api_server)
    yield driver
    driver.quit()


@pytest.fixture
def page(browser, api_server: ApiServer):
    """The search page, freshly loaded in light mode, its methods' forms built."""
    browser.get(f"{api_server.url}/lakejoin/docs")
    browser.execute_script("window.localStorage.removeItem('theme')")
    browser.get(f"{api_server.url}/lakejoin/search")
    wait_for(browser, "#method option")
    return browser


def result_rows(driver) -> list[list[str]]:
    from selenium.webdriver.common.by import By

    rows = wait_for(driver, "#results tr.result")
    return [
        [
            row.find_element(By.CSS_SELECTOR, "td:nth-child(1)").text,
            row.find_element(By.CSS_SELECTOR, ".table-title").text,
            row.find_element(By.CSS_SELECTOR, "td:nth-child(3)").text,
        ]
        for row in rows
    ]


def percent(share: float) -> str:
    """As the page writes a share: whole percent, 100 % and 0 % only when reached."""
    whole = math.floor(share * 100 + 0.5)  # JavaScript's Math.round
    if share >= 1:
        return "100 %"
    return f"{min(whole, 99)} %" if whole else "< 1 %"


def test_the_engine_is_loaded_at_startup(api_server: ApiServer, engine: QueryEngine) -> None:
    """The API server's start loads the snapshot and every index: the status says so before any
    search (the status route itself loads nothing)."""
    status = api_server.get("/lakejoin/api/status").json()
    assert status["warmup"]["state"] in ("loading", "ready")  # begun by the server's start, not by a request
    deadline = time.monotonic() + 600
    while status["warmup"]["state"] == "loading" and time.monotonic() < deadline:
        time.sleep(1)
        status = api_server.get("/lakejoin/api/status").json()
    loaded = engine.snapshot()
    assert status["warmup"]["state"] == "ready", status
    assert status["snapshot_id"] == loaded.snapshot_id and status["warmup"]["snapshot_id"] == loaded.snapshot_id
    assert status["loaded_families"] == sorted(loaded.families()) and not status["warmup"]["skipped"]


def test_find_a_table_by_typing_part_of_its_title(page, engine: QueryEngine, ids: dict, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    choose_table(page, "challen", CHALLENGES)
    chosen = page.find_element(By.ID, "chosen-table").text
    assert ids[CHALLENGES] not in chosen  # the internal id only on request ("show id")
    rows = {
        r.find_element(By.CSS_SELECTOR, "td:nth-child(2)").text: [
            c.text for c in r.find_elements(By.TAG_NAME, "td")[2:]
        ]
        for r in page.find_elements(By.CSS_SELECTOR, "#columns tbody tr")
    }
    profile = {c.name: c for c in engine.snapshot().columns_of(ids[CHALLENGES])}
    assert list(rows) == list(profile)
    assert rows["baker"][1] == f"{profile['baker'].distinct:,}"  # distinct, from catalog/columns
    key = [name for name, cells in rows.items() if cells[3] == "key"]
    assert key == [name for name, column in profile.items() if column.key_candidate]
    # a column name finds its tables too
    box = page.find_element(By.ID, "table-search")
    box.clear()
    box.send_keys("carrier")
    assert wait_for_text(page, "#table-list", "columns: carrier").startswith("airlines.csv")
    screenshot(page, tmp_path / "picker.png")


def test_each_methods_form(page, api_server: ApiServer, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    forms = api_server.get("/lakejoin/api/methods").json()
    method = Select(page.find_element(By.ID, "method"))
    assert [o.get_attribute("value") for o in method.options] == [m["name"] for m in forms["methods"]]
    assert method.first_selected_option.get_attribute("value") == "auto"
    for spec in forms["methods"]:
        method.select_by_value(spec["name"])
        assert page.find_element(By.ID, "method-help").text == spec["help"]
        fields = page.find_elements(By.CSS_SELECTOR, "#method-form [data-param]")
        assert [f.get_attribute("data-param") for f in fields] == [p["name"] for p in spec["params"]]
        for field, param in zip(fields, spec["params"]):
            label = page.find_element(By.CSS_SELECTOR, f"label[for='{field.get_attribute('id')}']")
            assert label.text and page.find_element(By.ID, f"{field.get_attribute('id')}-help").text == param["help"]
            if param["type"] == "bool":
                assert field.is_selected() == bool(param["default"])
            elif param["type"] == "float":
                assert float(field.get_attribute("value")) == param["default"]
                assert (float(field.get_attribute("min")), float(field.get_attribute("max"))) == (
                    param["minimum"],
                    param["maximum"],
                )
            elif param["type"] == "choice":
                assert Select(field).first_selected_option.get_attribute("value") == param["default"]
        if spec["name"] == "pexeso":
            screenshot(page, tmp_path / "pexeso-form.png")
    transform = next(p for p in forms["join"] if p["name"] == "transform")
    assert page.find_element(By.ID, "join-transform-help").get_attribute("textContent") == transform["help"]
    # auto explains what it will pick
    method.select_by_value("auto")
    choose_table(page, "challen", CHALLENGES)
    check_columns(page, ["series", "episode"])
    assert "MATE" in page.find_element(By.ID, "auto-pick").text
    # a parameter out of its bounds is refused next to its field
    method.select_by_value("lshensemble")
    threshold = page.find_element(By.ID, "param-threshold")
    threshold.clear()
    threshold.send_keys("7")
    check_columns(page, ["baker"])
    page.find_element(By.ID, "search").click()
    assert "from 0 to 1" in wait_for_text(page, "#param-threshold-message", "must be")


def test_a_results_score_sorting_and_join_preview(page, engine: QueryEngine, ids: dict, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    choose_table(page, "challen", CHALLENGES)
    search(page, "josie", ["baker"])
    expected = engine.search("josie", ["baker"], dataset_id=ids[CHALLENGES], k=10)["results"]
    assert result_rows(page) == [[str(r["rank"]), r["table"], r["column"]] for r in expected]
    best = expected[0]
    score = page.find_element(By.CSS_SELECTOR, "#results tr.result .score-text").text
    assert (
        score == f"{best['overlap']:,} of {round(best['overlap'] / best['containment']):,} values, "
        f"{percent(best['containment'])}"
    )
    # sortable: by table title, then back to rank
    page.find_element(By.CSS_SELECTOR, "th[data-sort=table] button").click()
    assert [r[1] for r in result_rows(page)] == sorted((r["table"] for r in expected), key=str.lower)
    assert page.find_element(By.CSS_SELECTOR, "th[data-sort=table]").get_attribute("aria-sort") == "ascending"
    page.find_element(By.CSS_SELECTOR, "th[data-sort=rank] button").click()
    # the joining column's profile on hover
    from selenium.webdriver import ActionChains

    ActionChains(page).move_to_element(page.find_element(By.CSS_SELECTOR, "#results tr.result .column-name")).perform()
    assert "distinct" in wait_for_text(page, "#column-tip", "key candidate")
    page.find_element(By.CSS_SELECTOR, "#results tr.result button.join-json").click()
    wait_for(page, "#preview tr.preview-row")
    joined, summary = engine.join("josie", ["baker"], dataset_id=ids[CHALLENGES], rank=1)
    provenance = summary["provenance"]
    assert page.find_element(By.ID, "rows-before").text == f"{provenance['rows_in']:,}"
    assert page.find_element(By.ID, "rows-after").text == f"{joined.num_rows:,}"
    matched = provenance["query_rows_matched"]
    assert (
        page.find_element(By.ID, "match-rate").text
        == f"{matched:,} of {provenance['rows_in']:,} rows matched ({percent(matched / provenance['rows_in'])})"
    )
    query_columns = engine.snapshot().staged_table(ids[CHALLENGES]).column_names
    added = [th.get_attribute("data-column") for th in page.find_elements(By.CSS_SELECTOR, "#preview th.added")]
    assert added == joined.column_names[len(query_columns) :]
    screenshot(page, tmp_path / "results-and-join.png")


def test_upload_a_table_and_let_auto_pick_mate(page, engine: QueryEngine, ids: dict, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    from lakejoin.query import read_table_file

    upload = tmp_path / "my_challenges.csv"
    engine.snapshot().staged_table(ids[CHALLENGES]).to_pandas().to_csv(upload, index=False)
    page.find_element(By.ID, "source-upload").click()
    page.find_element(By.ID, "file").send_keys(str(upload))
    wait_for(page, "input.column[value='episode']")
    search(page, "auto", ["series", "episode"])
    rows = result_rows(page)
    expected = engine.search("mate", ["series", "episode"], table=read_table_file(upload), k=10)["results"]
    assert rows == [[str(r["rank"]), r["table"], ", ".join(r["column"])] for r in expected]
    assert "auto picked MATE" in page.find_element(By.ID, "results-summary").text
    scores = [e.text for e in page.find_elements(By.CSS_SELECTOR, "#results tr.result .score-text")]
    assert scores == [
        f"{r['joinability']:,} of {round(r['joinability'] / r['share']):,} keys, {percent(r['share'])}"
        for r in expected
    ]
    assert "key: series→" in page.find_element(By.CSS_SELECTOR, "#results tr.result .evidence").text
    screenshot(page, tmp_path / "upload-mate.png")


def test_bad_input_is_explained_next_to_its_control(page, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    page.find_element(By.ID, "search").click()
    assert "choose a table" in wait_for_text(page, "#table-message", "first").lower()
    choose_table(page, "challen", CHALLENGES)
    check_columns(page, [])
    page.find_element(By.ID, "search").click()
    assert (
        wait_for_text(page, "#columns-message", "column") == "Choose at least one column of your table to search with."
    )
    page.find_element(By.ID, "source-upload").click()
    garbage = tmp_path / "broken.parquet"
    garbage.write_bytes(b"PAR1 this is not parquet at all")
    page.find_element(By.ID, "file").send_keys(str(garbage))
    message = wait_for_text(page, "#file-message", "could not be read")
    assert message.startswith("broken.parquet could not be read") and "Traceback" not in message
    huge = tmp_path / "huge.csv"
    huge.write_bytes(b"name\n" + b"x" * (MAX_UPLOAD_BYTES + 1))
    page.find_element(By.ID, "file").send_keys(str(huge))
    assert f"huge.csv is {MAX_UPLOAD_BYTES + 6:,} bytes; uploads are limited to 256 KiB" in wait_for_text(
        page, "#file-message", "huge.csv is"
    )
    assert page.find_element(By.ID, "file").get_attribute("aria-invalid") == "true"
    screenshot(page, tmp_path / "bad-input.png")


def test_dark_mode_follows_airflows_setting(page, api_server: ApiServer, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    def background() -> list[int]:
        """The body's background as RGB (drawn on a canvas: Chromium reports oklch colours as oklch)."""
        return page.execute_script(
            "const c = document.createElement('canvas').getContext('2d');"
            "c.fillStyle = getComputedStyle(document.body).backgroundColor; c.fillRect(0, 0, 1, 1);"
            "return Array.from(c.getImageData(0, 0, 1, 1).data.slice(0, 3));"
        )

    assert page.find_element(By.TAG_NAME, "html").get_attribute("data-theme") == "light" and min(background()) > 200
    page.execute_script("window.localStorage.setItem('theme', 'dark')")  # where Airflow's UI keeps its choice
    page.get(f"{api_server.url}/lakejoin/search")
    choose_table(page, "challen", CHALLENGES)
    assert page.find_element(By.TAG_NAME, "html").get_attribute("data-theme") == "dark"
    assert max(background()) < 60
    screenshot(page, tmp_path / "dark.png")
    page.execute_script("window.localStorage.removeItem('theme')")


def test_the_page_is_in_airflows_navigation(browser, api_server: ApiServer) -> None:
    """Airflow's React UI renders the plugin's external view at /plugin/<url_route> in an iframe."""
    from selenium.webdriver.common.by import By

    browser.get(f"{api_server.url}/plugin/lakejoin-search")
    frames = wait_for(browser, "iframe")
    frame = next(f for f in frames if (f.get_attribute("src") or "").endswith("/lakejoin/search"))
    browser.switch_to.frame(frame)
    assert "Snapshot" in wait_for_text(browser, "#snapshot", "Snapshot")
    assert browser.find_element(By.CSS_SELECTOR, "label[for='table-search']").text.startswith("Find a table")
    browser.switch_to.default_content()
