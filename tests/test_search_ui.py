"""The search page driven in headless Chromium (Selenium + chromedriver) against the real API server.

Needs Debian's ``chromium`` and ``chromium-driver`` (``apt-get install -y chromium chromium-driver``)
and ``selenium`` in the venv; skipped when they are missing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_plugin import ApiServer, api_server, engine, ids  # noqa: F401  (shared fixtures)

from lakejoin.query import QueryEngine

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1400,1000")


def signed_in_chromium(server: ApiServer):
    """Headless Chromium holding ``server``'s token as the Airflow UI does (skips when missing)."""
    webdriver = pytest.importorskip("selenium.webdriver")
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.skip("apt-get install -y chromium chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=shutil.which("chromedriver") or CHROMEDRIVER))
    driver.set_page_load_timeout(120)
    # The Airflow UI keeps its JWT in the `_token` cookie; the page's fetches send it.
    driver.get(f"{server.url}/lakejoin/docs")
    driver.add_cookie({"name": "_token", "value": server.token, "path": "/"})
    return driver


@pytest.fixture(scope="module")
def browser(api_server: ApiServer):  # noqa: F811
    driver = signed_in_chromium(api_server)
    yield driver
    driver.quit()


def wait_for(driver, css: str, timeout: float = 180):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(expected_conditions.presence_of_all_elements_located((By.CSS_SELECTOR, css)))


def pick(driver, method: str, columns: list[str]) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    for box in wait_for(driver, "input.column"):
        if (box.get_attribute("value") in columns) != box.is_selected():
            box.click()
    Select(driver.find_element(By.ID, "method")).select_by_value(method)
    driver.find_element(By.ID, "search").click()


def result_rows(driver) -> list[list[str]]:
    from selenium.webdriver.common.by import By

    rows = wait_for(driver, "#results tr.result")
    return [[cell.text for cell in row.find_elements(By.TAG_NAME, "td")[:3]] for row in rows]


def test_search_and_preview_a_lake_dataset(browser, api_server: ApiServer, engine: QueryEngine, ids: dict) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.get(f"{api_server.url}/lakejoin/search")
    wait_for(browser, "#dataset option")
    Select(browser.find_element(By.ID, "dataset")).select_by_value(ids["bakeoff_challenges.csv"])
    pick(browser, "josie", ["baker"])
    expected = engine.search("josie", ["baker"], dataset_id=ids["bakeoff_challenges.csv"], k=10)["results"]
    assert result_rows(browser) == [[str(r["rank"]), r["table"], r["column"]] for r in expected]
    assert "overlap" in browser.find_element(By.CSS_SELECTOR, "#results tr.result").text
    browser.find_element(By.CSS_SELECTOR, "#results tr.result button.join-json").click()
    previews = wait_for(browser, "#preview tr.preview-row")
    assert len(previews) == 20
    assert f"Joined {expected[0]['table']} (rank 1" in browser.find_element(By.ID, "preview-info").text
    headers = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#preview th")]
    assert "bakeoff_bakers__baker_full" in headers


def test_upload_a_table_and_search_its_composite_key(browser, api_server: ApiServer, engine: QueryEngine, ids: dict, tmp_path: Path) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    upload = tmp_path / "my_challenges.csv"
    engine.snapshot().staged_table(ids["bakeoff_challenges.csv"]).to_pandas().to_csv(upload, index=False)
    browser.get(f"{api_server.url}/lakejoin/search")
    wait_for(browser, "#dataset option")
    browser.find_element(By.ID, "file").send_keys(str(upload))
    wait_for(browser, "input.column[value='episode']")
    pick(browser, "mate", ["series", "episode"])
    rows = result_rows(browser)
    expected = engine.search("mate", ["series", "episode"], table=_read(upload), k=10)["results"]
    assert rows == [[str(r["rank"]), r["table"], ", ".join(r["column"])] for r in expected]
    assert "mapping: series→" in browser.find_element(By.CSS_SELECTOR, "#results tr.result").text
    scores = [row.find_elements(By.TAG_NAME, "td")[3].text for row in browser.find_elements(By.CSS_SELECTOR, "#results tr.result")]
    assert scores == [f"{r['joinability']:,} keys (share {r['share']:.3f})" for r in expected]  # an integer count, never 2e+04


def _read(path: Path):
    from lakejoin.query import read_table_file

    return read_table_file(path)


def test_the_page_is_in_airflows_navigation(browser, api_server: ApiServer) -> None:  # noqa: F811
    """Airflow's React UI renders the plugin's external view at /plugin/<url_route> in an iframe."""
    from selenium.webdriver.common.by import By

    browser.get(f"{api_server.url}/plugin/lakejoin-search")
    frames = wait_for(browser, "iframe")
    assert any((frame.get_attribute("src") or "").endswith("/lakejoin/search") for frame in frames)
    browser.switch_to.frame(next(f for f in frames if (f.get_attribute("src") or "").endswith("/lakejoin/search")))
    assert "Snapshot" in wait_for(browser, "#snapshot")[0].text or wait_for(browser, "#dataset option")
    browser.switch_to.default_content()
