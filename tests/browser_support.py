"""Debian's Chromium, headless, driven through its chromedriver: one for the whole test run (the page
tests leave it on a blank tab with its logs read)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
# Without the background-networking flags Chromium reaches for Google's services, which are refused here.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
)
WAIT_S = 10


@contextmanager
def chromium() -> Iterator[Any]:
    """A driven Chromium; skips the test where selenium or Chromium is missing."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is missing: pip install -e '.[test]'")
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.chrome.service import Service

    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not Path(path).exists()]
    if missing:
        pytest.skip(
            f"Chromium is not installed ({', '.join(missing)} missing): `make browser` installs Debian's "
            "chromium and chromium-driver with apt-get (as root), or set CHROMIUM and CHROMEDRIVER"
        )
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    # The performance log carries the WebSocket frames, so a test can read what the server sent.
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    try:
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    except WebDriverException:
        shutil.rmtree(profile, ignore_errors=True)
        raise  # installed but broken is a failure, not a skip
    driver.set_script_timeout(WAIT_S)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
