"""Headless Chromium (Selenium + chromedriver) signed in to the plugin's API server as the Airflow UI
is, and the waits and clicks the page tests share.

Needs Debian's ``chromium`` and ``chromium-driver`` and ``selenium`` in the venv; a test that asks for
a browser is skipped when they are missing.
"""

from __future__ import annotations

import base64
import shutil
from pathlib import Path

import pytest

from testkit.api_server import ApiServer

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1400,1000",
)


def signed_in_chromium(server: ApiServer):
    """Headless Chromium holding ``server``'s token as the Airflow UI does (skips when missing)."""
    webdriver = pytest.importorskip("selenium.webdriver")
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.skip("apt-get install -y chromium chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    driver = webdriver.Chrome(
        options=options, service=webdriver.ChromeService(executable_path=shutil.which("chromedriver") or CHROMEDRIVER)
    )
    driver.set_page_load_timeout(120)
    # The Airflow UI keeps its JWT in the `_token` cookie; the page's fetches send it.
    driver.get(f"{server.url}/lakejoin/docs")
    driver.add_cookie({"name": "_token", "value": server.token, "path": "/"})
    return driver


def wait_for(driver, css: str, timeout: float = 180):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(
        expected_conditions.presence_of_all_elements_located((By.CSS_SELECTOR, css))
    )


def wait_for_text(driver, css: str, text: str, timeout: float = 180) -> str:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, timeout).until(
        expected_conditions.text_to_be_present_in_element((By.CSS_SELECTOR, css), text)
    )
    return driver.find_element(By.CSS_SELECTOR, css).text


def screenshot(driver, path: Path) -> Path:
    """The whole page (not just the viewport) as PNG."""
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
    path.write_bytes(base64.b64decode(shot["data"]))
    return path


def type_into(field, text: str, seconds: float = 60.0) -> None:
    """Replace a form field's text with ``text``, typed key by key as a person types it. A form that
    re-renders while it is typed into can drop a keystroke under load, so each key is sent once the
    field holds the text before it, and sent again when it did not arrive."""
    import time

    from selenium.webdriver.common.keys import Keys

    deadline = time.monotonic() + seconds
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys(Keys.DELETE)
    while (value := _settled_value(field)) != text:
        if time.monotonic() > deadline:
            raise AssertionError(f"the field holds {value!r}, not {text!r}")
        if text.startswith(value):
            field.send_keys(text[len(value)])
        else:  # a key arrived late, after it was sent again: start over
            field.send_keys(Keys.CONTROL, "a")
            field.send_keys(Keys.DELETE)


def _settled_value(field, seconds: float = 0.3) -> str:
    """The field's value once it stopped changing for a moment (the page may still be rendering a key)."""
    import time

    value = field.get_attribute("value")
    while True:
        time.sleep(seconds / 3)
        now = field.get_attribute("value")
        if now == value:
            return now
        value = now


def choose_table(driver, typed: str, title: str) -> None:
    """Type part of a title into the picker, then pick ``title`` with the keyboard."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    box = driver.find_element(By.ID, "table-search")
    box.clear()
    box.send_keys(typed)
    wait_for(driver, f"#table-list[data-query='{typed}']:not([hidden])")
    options = driver.execute_script(
        "return [...document.querySelectorAll('#table-list li[role=option] .title')].map((t) => t.textContent)"
    )
    box.send_keys(*[Keys.ARROW_DOWN] * (options.index(title) + 1), Keys.ENTER)
    wait_for_text(driver, "#chosen-table", title)
    wait_for(driver, "input.column")


def check_columns(driver, columns: list[str]) -> None:
    for box in wait_for(driver, "input.column"):
        if (box.get_attribute("value") in columns) != box.is_selected():
            box.click()


def search(driver, method: str, columns: list[str]) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    check_columns(driver, columns)
    Select(driver.find_element(By.ID, "method")).select_by_value(method)
    driver.find_element(By.ID, "search").click()
