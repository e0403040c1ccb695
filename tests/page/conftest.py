"""The browser tests' fixtures (tests/page/test_browser*.py): the app served on a local port, one
Chromium per module and a page on it. The skip-or-fail rule runs where those modules import
tests/page/browser.py, so a module without them collects no browser."""

from __future__ import annotations

import time
import urllib.request

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
