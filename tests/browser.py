"""Headless Debian Chromium for the browser tests: found, or a failure naming the packages.

``make test`` installs ``chromium`` and ``chromium-driver`` when they are missing; a browser
test never skips. As root (CI) Chromium needs ``--no-sandbox``; the other flags keep it
from reaching the network or a profile of its own.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

PACKAGES = "chromium chromium-driver"
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--disable-background-networking", "--disable-component-update", "--no-first-run",
         "--disable-default-apps", "--disable-sync")


def chromium() -> str:
    """The Chromium binary, or the test fails saying what to install."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail(f"headless Chromium is not installed: apt-get install -y {PACKAGES} "
                    "(make test installs it)")
    return found


def chromedriver() -> str:
    found = shutil.which("chromedriver")
    if found is None:
        pytest.fail(f"chromedriver is not installed: apt-get install -y {PACKAGES} "
                    "(make test installs it)")
    return found


@contextmanager
def driver(width: int = 1280, height: int = 1000) -> Iterator[Any]:
    """A Selenium WebDriver on a fresh headless Chromium profile."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, drv = chromium(), chromedriver()
    with tempfile.TemporaryDirectory(prefix="shoewarden-chromium-") as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = binary
        for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
            options.add_argument(flag)
        browser = webdriver.Chrome(service=Service(drv), options=options)
        try:
            yield browser
        finally:
            browser.quit()
