"""A small headless-Chromium driver over the DevTools protocol (CDP): open a page, wait until
its rendered text says something, click an element by its text, take a screenshot.

Playwright/Selenium would bring their own browser downloads; the Debian ``chromium`` and
aiohttp's WebSocket client (a dependency of MLflow) are enough for what ``make ui-check``
needs. The MLflow UI is a React app: what matters is the DOM after it rendered, so every check
polls ``document.body.innerText`` until a condition holds or a deadline passes.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                  "--remote-debugging-port=0"]


def chromium_binary() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    raise SystemExit("no chromium on PATH: `sudo apt-get install -y chromium` "
                     "(make ui-check installs it when apt is available)")


class Browser:
    """One Chromium process with one page, driven over CDP."""

    def __init__(self, width: int = 1400, height: int = 900):
        self.size = (width, height)
        self.profile = tempfile.mkdtemp(prefix="kebab-chromium-")
        self.proc: subprocess.Popen | None = None
        self._ids = itertools.count(1)

    async def __aenter__(self) -> Browser:
        self.proc = subprocess.Popen(
            [chromium_binary(), *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}",
             f"--window-size={self.size[0]},{self.size[1]}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port = await self._devtools_port()
        self.http = aiohttp.ClientSession()
        async with self.http.get(f"http://127.0.0.1:{port}/json/list") as reply:
            pages = [t for t in await reply.json() if t["type"] == "page"]
        self.ws = await self.http.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0)
        await self.call("Page.enable")
        await self.call("Emulation.setDeviceMetricsOverride", width=self.size[0],
                        height=self.size[1], deviceScaleFactor=1, mobile=False)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.ws.close()
        await self.http.close()
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)

    async def _devtools_port(self) -> int:
        """Chromium writes the port it picked to DevToolsActivePort in its profile."""
        active = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if active.is_file() and active.read_text().strip():
                return int(active.read_text().splitlines()[0])
            if self.proc is not None and self.proc.poll() is not None:
                raise SystemExit(f"chromium exited with {self.proc.returncode}")
            await asyncio.sleep(0.1)
        raise SystemExit("chromium did not open its DevTools port within 60 s")

    async def call(self, method: str, **params: Any) -> dict:
        msg_id = next(self._ids)
        await self.ws.send_str(json.dumps({"id": msg_id, "method": method, "params": params}))
        async for msg in self.ws:
            data = json.loads(msg.data)
            if data.get("id") == msg_id:
                if "error" in data:
                    raise RuntimeError(f"{method}: {data['error']}")
                return data.get("result", {})
        raise RuntimeError("the DevTools connection closed")

    async def evaluate(self, expression: str, await_promise: bool = False) -> Any:
        """The expression's value; ``await_promise``: an async expression's resolved value."""
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                                 awaitPromise=await_promise)
        return result.get("result", {}).get("value")

    async def open(self, url: str) -> None:
        await self.call("Page.navigate", url=url)

    async def text(self) -> str:
        return await self.evaluate("document.body ? document.body.innerText : ''") or ""

    async def wait_text(self, condition: Callable[[str], bool], timeout: float = 90) -> str:
        """The page's rendered text once ``condition`` holds; the last text seen if it never
        does (the caller's check then fails with what was on the page)."""
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = await self.text()
            if condition(text):
                return text
            await asyncio.sleep(0.5)
        return text

    async def click_text(self, text: str) -> bool:
        """Click the innermost visible element whose own text is ``text``."""
        script = f"""(() => {{
            const want = {json.dumps(text)};
            const all = [...document.querySelectorAll('body *')].filter(e =>
                e.offsetParent !== null && e.innerText && e.innerText.trim() === want);
            const leaf = all.filter(e => ![...e.children].some(c => all.includes(c)));
            if (!leaf.length) return false;
            leaf[0].click();
            return true;
        }})()"""
        return bool(await self.evaluate(script))

    async def click_starting(self, selector: str, prefix: str) -> bool:
        """Click the first element matching ``selector`` whose text starts with ``prefix``."""
        return bool(await self.evaluate(f"""(() => {{
            const e = [...document.querySelectorAll({json.dumps(selector)})].find(
                x => x.innerText && x.innerText.startsWith({json.dumps(prefix)}));
            if (!e) return false;
            e.click();
            return true;
        }})()"""))

    async def click_label(self, label: str) -> bool:
        return bool(await self.evaluate(f"""(() => {{
            const e = document.querySelector('[aria-label={json.dumps(label)}]');
            if (!e) return false;
            e.click();
            return true;
        }})()"""))

    async def scroll_to_text(self, prefix: str, block: str = "start") -> None:
        """Scroll the innermost element whose text starts with ``prefix`` to the top (or
        ``block``: ``center``, ``end``, ``nearest``)."""
        await self.evaluate(f"""(() => {{
            const all = [...document.querySelectorAll('body *')].filter(
                e => e.innerText && e.innerText.startsWith({json.dumps(prefix)}));
            const leaf = all.filter(e => ![...e.children].some(c => all.includes(c)));
            if (leaf.length) leaf[0].scrollIntoView({{block: {json.dumps(block)}}});
        }})()""")
        await asyncio.sleep(1)

    async def screenshot(self, path: Path, width: int | None = None, colors: int = 128) -> None:
        """A PNG of the viewport, reduced to ``colors`` colours (pictures for the docs stay
        small); ``width``: scaled down to it first."""
        shot = await self.call("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(shot["data"]))
        from PIL import Image

        with Image.open(path) as image:
            small = image.convert("RGB")
        if width:
            small = small.resize((width, round(small.height * width / small.width)),
                                 Image.LANCZOS)
        small.quantize(colors).save(path, optimize=True)
