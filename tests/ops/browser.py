"""Headless Chromium from the distribution's packages, driven by Selenium, for the ops page
test. Nothing is downloaded: the browser and its driver are /usr/bin/chromium and
/usr/bin/chromedriver (`apt-get install chromium chromium-driver`; .ci/run installs them).

Selenium blocks, and the page under test is served by the test's own event loop, so every
call goes through a thread (`await browser.call(...)`)."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.wait import WebDriverWait

T = TypeVar("T")
# A click that submits a form returns before the next page is there, and the live refresh
# replaces the rooms table now and then: lookups wait this long for what they ask for.
WAIT_S = 10.0
CHROMIUM = os.environ.get("CODEMOJEX_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CODEMOJEX_TEST_CHROMEDRIVER", "/usr/bin/chromedriver")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1100",
)


def missing() -> str | None:
    """Why there is no browser here (None when there is one)."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (Path(path).exists() or shutil.which(path)):
            return f"{path} is not installed (apt-get install chromium chromium-driver)"
    return None


class Browser:
    def __init__(self, profile: Path) -> None:
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in (*FLAGS, f"--user-data-dir={profile}"):
            options.add_argument(flag)
        self.driver = webdriver.Chrome(
            service=Service(executable_path=CHROMEDRIVER), options=options
        )

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.to_thread(fn, *args)

    async def get(self, url: str) -> None:
        await self.call(self.driver.get, url)

    def _wait(self) -> WebDriverWait[webdriver.Chrome]:
        return WebDriverWait(
            self.driver,
            WAIT_S,
            ignored_exceptions=(NoSuchElementException, StaleElementReferenceException),
        )

    async def find(self, css: str) -> WebElement:
        return await self.call(self._wait().until, lambda d: d.find_element(By.CSS_SELECTOR, css))

    async def all(self, css: str) -> list[WebElement]:
        return await self.call(self.driver.find_elements, By.CSS_SELECTOR, css)

    async def text(self, css: str) -> str:
        """The element's text, read in one step with the lookup (a refresh between the two
        would leave a stale element)."""
        return await self.call(
            self._wait().until, lambda d: d.find_element(By.CSS_SELECTOR, css).text
        )

    async def type(self, css: str, text: str) -> None:
        element = await self.find(css)
        await self.call(element.clear)
        await self.call(element.send_keys, text)

    async def click(self, css: str) -> None:
        element = await self.find(css)
        await self.call(element.click)

    async def page(self) -> str:
        return await self.call(lambda: self.driver.page_source)

    async def screenshot(self, path: Path) -> None:
        await self.call(self.driver.save_screenshot, str(path))

    def quit(self) -> None:
        self.driver.quit()
