"""The fixtures of the tests that serve the app: the app served on a local port (`url`), a
gradio_client on it and the numbers kept for docs/performance.md (the hardening tests), one
Chromium per module and a page on it (the browser tests). The browser's skip-or-fail rule runs
where those modules import tests/page/browser.py."""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

import pytest


def wait_for_http(url: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.2)


@pytest.fixture(scope="module")
def url():
    import app  # the page is built once the browser module has passed its skips

    _, local_url, _ = app.demo.launch(
        prevent_thread_lock=True, server_name="127.0.0.1", quiet=True, **app.SERVE_OPTIONS
    )
    try:
        wait_for_http(local_url)
        yield local_url
    finally:
        app.demo.close()


@pytest.fixture(scope="module")
def client(url, tmp_path_factory):
    """A gradio_client on the served app (tests/page/test_hardening_api*.py)."""
    from gradio_client import Client

    return Client(url, verbose=False, download_files=str(tmp_path_factory.mktemp("dl")))


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    """Numbers for docs/performance.md: printed by the tests and kept in one JSON file under
    pytest's temp dir (its path is printed too)."""
    path = tmp_path_factory.getbasetemp() / "hardening-numbers.json"
    numbers: dict[str, Any] = {}

    def keep(key: str, value: Any) -> None:
        numbers[key] = value
        path.write_text(json.dumps(numbers, indent=1))
        print(f"{key}: {json.dumps(value)} → {path}")

    return keep


@pytest.fixture(scope="module")
def browser():
    from tests.page.browser import ARGS, CHROMIUM, sync_api

    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def page(browser, url):
    from tests.page.browser import open_page

    page = open_page(browser, url)
    yield page
    page.context.close()
