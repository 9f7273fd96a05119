"""A minimal Chrome DevTools Protocol client over ``--remote-debugging-pipe`` (no extra packages).

Chromium reads NUL-terminated JSON commands on fd 3 and writes replies and events on fd 4.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--remote-debugging-pipe",
]


def find_chromium() -> Optional[str]:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    def __init__(self, executable: str, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="index-site-chromium-")
        cmd_r, cmd_w = os.pipe()
        res_r, res_w = os.pipe()
        # move the child's ends above 10 so that dup2 onto 3 and 4 cannot clobber them
        child_in = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10)
        child_out = fcntl.fcntl(res_w, fcntl.F_DUPFD, 10)
        os.close(cmd_r)
        os.close(res_w)

        def _child() -> None:
            os.dup2(child_in, 3)
            os.dup2(child_out, 4)

        self.proc = subprocess.Popen(
            [executable, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            preexec_fn=_child,  # noqa: PLW1509 (single-threaded test helper)
            close_fds=False,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        os.close(child_in)
        os.close(child_out)
        self._w = cmd_w
        self._r = res_r
        self._buf = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    # -- protocol -------------------------------------------------------------------------------
    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no reply from chromium")
            ready, _, _ = select.select([self._r], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._r, 1 << 20)
            if not chunk:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.poll() is not None else ""
                raise RuntimeError(f"chromium closed the pipe (exit {self.proc.poll()}): {err[-2000:]}")
            self._buf += chunk
        raw, _, self._buf = self._buf.partition(b"\0")
        return json.loads(raw)

    def send(self, method: str, params: Optional[dict[str, Any]] = None, session: Optional[str] = None) -> Any:
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method: str, session: Optional[str] = None) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while True:
            for i, ev in enumerate(self.events):
                if ev.get("method") == method and (session is None or ev.get("sessionId") == session):
                    return self.events.pop(i)
            self.events.append(self._read_message(deadline))

    # -- page helpers ---------------------------------------------------------------------------
    def open_page(self, url: str, width: int = 1100, height: int = 1300) -> Page:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page.enable", "Runtime.enable", "Network.enable", "Log.enable"):
            self.send(domain, session=session)
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session,
        )
        self.events.clear()
        self.send("Page.navigate", {"url": url}, session)
        self.wait_event("Page.loadEventFired", session)
        return Page(self, session)

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                try:
                    self.send("Browser.close")
                except (RuntimeError, TimeoutError, OSError):
                    pass
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        finally:
            for fd in (self._w, self._r):
                try:
                    os.close(fd)
                except OSError:
                    pass
            if self.proc.stderr:
                self.proc.stderr.close()
            shutil.rmtree(self.profile, ignore_errors=True)


class Page:
    def __init__(self, browser: Browser, session: str) -> None:
        self.browser = browser
        self.session = session

    def eval(self, expression: str) -> Any:
        result = self.browser.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}, self.session
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"JavaScript error: {result['exceptionDetails']}")
        return result["result"].get("value")

    def text(self, element_id: str) -> str:
        return self.eval(f"document.getElementById({json.dumps(element_id)}).textContent")

    def select(self, element_id: str, value: str) -> None:
        """Choose an option the way a user does: set the value, fire 'change'."""
        ok = self.eval(
            f"""(function () {{
              var s = document.getElementById({json.dumps(element_id)});
              var found = Array.prototype.some.call(s.options, function (o) {{ return o.value === {json.dumps(value)}; }});
              if (!found) return false;
              s.value = {json.dumps(value)};
              s.dispatchEvent(new Event("change", {{bubbles: true}}));
              return true;
            }})()"""
        )
        if not ok:
            raise AssertionError(f"#{element_id} has no option {value!r}")

    def requested_urls(self) -> list[str]:
        return [
            e["params"]["request"]["url"]
            for e in self.browser.events
            if e.get("method") == "Network.requestWillBeSent" and e.get("sessionId") == self.session
        ]

    def console_errors(self) -> list[str]:
        """Uncaught exceptions, console.error/assert calls and browser log errors of this page so far."""
        out = []
        for e in self.browser.events:
            if e.get("sessionId") != self.session:
                continue
            method, params = e.get("method"), e.get("params", {})
            if method == "Runtime.exceptionThrown":
                out.append(json.dumps(params.get("exceptionDetails", {}))[:500])
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description"))) for a in params.get("args", [])))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                out.append(params["entry"].get("text", ""))
        return out

    def screenshot(self, path: Path) -> None:
        data = self.browser.send(
            "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, self.session
        )["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
