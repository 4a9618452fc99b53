"""Real JupyterLab driven by Debian's chromium through Playwright, for tests marked ``browser``.

    lab = JupyterLab(root_dir).start()          # a private server on 127.0.0.1
    with chromium() as browser:
        page = browser.new_page()
        open_notebook(page, lab, "nb.ipynb")
        run_cell(page, 0)

Never downloads a browser: chromium must be at /usr/bin/chromium (``apt-get install chromium``);
when it is missing the test fails and says so.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from .servers import free_port

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


class JupyterLab:
    """A JupyterLab server in its own process group, with private config, runtime and settings."""

    def __init__(self, root_dir: Path, state_dir: Path):
        self.root_dir = Path(root_dir)
        self.state_dir = Path(state_dir)
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None
        self.log = self.state_dir / "jupyterlab.log"
        self.state_dir.mkdir(parents=True, exist_ok=True)

    def _env(self) -> dict[str, str]:
        settings = self.state_dir / "settings"
        notification = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
        notification.parent.mkdir(parents=True, exist_ok=True)
        # Without this a "check for news?" toast covers the notebook.
        notification.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
        env = dict(os.environ)
        env.update({
            "JUPYTER_CONFIG_DIR": str(self.state_dir / "config"),
            "JUPYTER_RUNTIME_DIR": str(self.state_dir / "runtime"),
            "JUPYTERLAB_WORKSPACES_DIR": str(self.state_dir / "workspaces"),
            "JUPYTERLAB_SETTINGS_DIR": str(settings),
            # The page loads the notebook extension of the bettong_nb these tests import (an
            # editable install puts none in share/jupyter), ahead of any installed copy.
            "JUPYTER_PATH": os.pathsep.join(filter(None, [str(self._extension_path()), env.get("JUPYTER_PATH")])),
        })
        env.pop("DEEPSEEK_API_KEY", None)  # the browser test never talks to a real model
        return env

    def _extension_path(self) -> Path:
        """A JUPYTER_PATH entry whose labextensions/bettong-nb is bettong_nb's built extension."""
        spec = importlib.util.find_spec("bettong_nb")
        built = Path(spec.origin).parent / "notebook" / "labextension"
        if not (built / "package.json").exists():
            raise RuntimeError(f"{built} holds no built extension: cd frontend && npm ci && npm run build")
        folder = self.state_dir / "jupyter_path"
        link = folder / "labextensions" / "bettong-nb"
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink():
            link.symlink_to(built, target_is_directory=True)
        return folder

    def start(self, timeout: float = 60.0) -> "JupyterLab":
        command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={self.port}",
                   f"--ServerApp.token={self.token}", "--ServerApp.ip=127.0.0.1", "--allow-root",
                   f"--ServerApp.root_dir={self.root_dir}", "--ServerApp.port_retries=0"]
        log = open(self.log, "wb")
        self.process = subprocess.Popen(command, env=self._env(), stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {self.process.returncode}:\n"
                                   f"{self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/api/status?token={self.token}", timeout=2) as reply:
                    if reply.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"jupyter lab did not answer within {timeout} s:\n{self.log.read_text()[-3000:]}")

    def _api(self, method: str, path: str) -> bytes:
        request = urllib.request.Request(f"{self.url}{path}?token={self.token}", method=method)
        with urllib.request.urlopen(request, timeout=5) as reply:
            return reply.read()

    def stop(self) -> None:
        if self.process is None:
            return
        with contextlib.suppress(Exception):
            for kernel in json.loads(self._api("GET", "/api/kernels")):
                self._api("DELETE", f"/api/kernels/{kernel['id']}")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=5)
        self.process = None


@contextlib.contextmanager
def chromium() -> Iterator[object]:
    """Debian's chromium under Playwright; fails (never skips) when it is not installed."""
    if not os.path.exists(CHROMIUM):
        raise RuntimeError(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium); "
                           "the browser tests never download a browser")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def open_notebook(page, lab: JupyterLab, name: str, timeout_ms: float = 60_000) -> None:
    """Open ``name`` and wait until its kernel is connected and idle."""
    page.goto(f"{lab.url}/lab/tree/{name}?token={lab.token}&reset")
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=timeout_ms)
    # The execution indicator says idle before the kernel is connected; the status bar does not.
    page.locator(".jp-StatusBar-Widget", has_text="| Idle").first.wait_for(timeout=timeout_ms)


def kernel_ready(lab: JupyterLab, name: str) -> bool:
    """Whether the server says the page's kernel for ``name`` is connected and idle (Notebook 7
    shows no status bar to read it from)."""
    for session in json.loads(lab._api("GET", "/api/sessions")):
        kernel = session["kernel"]
        if session["path"] == name and kernel["execution_state"] == "idle" and kernel["connections"] > 0:
            return True
    return False


def open_notebook7(page, lab: JupyterLab, name: str, timeout: float = 60.0) -> None:
    """Open ``name`` in Notebook 7 and wait until its kernel is connected and idle. On a busy
    machine the page may ask which kernel to start before it has read the kernel specs: the
    notebook's own kernel is the dialog's default, so take it."""
    page.goto(f"{lab.url}/notebooks/{name}?token={lab.token}")
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=timeout * 1000)
    deadline = time.monotonic() + timeout
    while not kernel_ready(lab, name):
        dialog = page.locator(".jp-Dialog", has_text="Select Kernel")
        if dialog.count():
            dialog.get_by_role("button", name="Select").click()
        if time.monotonic() > deadline:
            raise AssertionError(f"{name}: Notebook 7's kernel not connected and idle within {timeout:g} s")
        time.sleep(0.1)


def cell(page, index: int):
    return page.locator(".jp-Notebook .jp-Cell").nth(index)


def run_cell(page, index: int) -> None:
    cell(page, index).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")


def wait_idle(page, index: int, timeout_ms: float = 30_000) -> None:
    """Wait until cell ``index`` has run: its prompt shows an execution count, not ``[*]``."""
    prompt = cell(page, index).locator(".jp-InputPrompt").first
    deadline = time.monotonic() + timeout_ms / 1000
    while time.monotonic() < deadline:
        text = prompt.inner_text().strip()
        if text and "*" not in text and any(c.isdigit() for c in text):
            return
        time.sleep(0.1)
    raise AssertionError(f"cell {index} still running after {timeout_ms / 1000:.0f} s (prompt {text!r})")


# Fixtures a browser test module shares: one server and one browser for all its tests.
#     from support.browser import browser, lab  # noqa: F401  (fixtures)

@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    server = JupyterLab(tmp_path_factory.mktemp("root"), tmp_path_factory.mktemp("state")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser():
    with chromium() as browser:
        yield browser
