"""Run notebooks in a real JupyterLab or Jupyter Notebook 7 in headless Chromium (Debian's, driven
by Playwright).

Used by the browser tests. Follows what was measured on these machines
(../shared/notes/notebook-testing.md): fresh Jupyter dirs, autosave off, windowing off so every
cell is in the DOM, every request that is not to 127.0.0.1 aborted, bounded waits, and no
process left behind.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

CHROMIUM = os.environ.get("NBPROF_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage",
]


def chromium_available() -> bool:
    return os.path.exists(CHROMIUM) or shutil.which("chromium") is not None


def notebook7_available() -> bool:
    """Jupyter Notebook 7 (the ``notebook`` package, built on JupyterLab) in this Python."""
    try:
        import notebook
    except ImportError:
        return False
    return int(notebook.__version__.split(".")[0]) >= 7


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    def __init__(self, root: Path, port: int, token: str, proc: subprocess.Popen, env: dict, app: str = "lab"):
        self.root, self.port, self.token, self.proc, self.env, self.app = root, port, token, proc, env, app

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def api(self, path: str, method: str = "GET") -> object:
        req = urllib.request.Request(self.url + path, method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
        return json.loads(body) if body else None


@contextmanager
def jupyterlab(root: Path, timeout: float = 60, app: str = "lab") -> Iterator[Lab]:
    """Start JupyterLab (``app="notebook"``: Jupyter Notebook 7) serving ``root``; stop it (and its
    kernels) afterwards."""
    base = Path(tempfile.mkdtemp(prefix="nbprof-lab-"))
    env = dict(os.environ)
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTERLAB_SETTINGS_DIR", "JUPYTERLAB_WORKSPACES_DIR",
                 "JUPYTER_RUNTIME_DIR"):
        d = base / name.lower()
        d.mkdir()
        env[name] = str(d)
    settings = Path(env["JUPYTERLAB_SETTINGS_DIR"])
    (settings / "@jupyterlab" / "docmanager-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "docmanager-extension" / "plugin.jupyterlab-settings").write_text(
        json.dumps({"autosave": False}))
    (settings / "@jupyterlab" / "notebook-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings").write_text(
        json.dumps({"windowingMode": "none"}))
    (settings / "@jupyterlab" / "apputils-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    port, token = _free_port(), secrets.token_hex(16)
    cmd = [
        sys.executable, "-m", {"lab": "jupyterlab", "notebook": "notebook"}[app], "--no-browser", "--ip=127.0.0.1", f"--port={port}",
        "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", "--ServerApp.allow_root=True",
        f"--FileCheckpoints.checkpoint_dir={base / 'checkpoints'}", f"--ServerApp.root_dir={root}",
    ]
    if app == "lab":
        cmd += ["--LabApp.expose_app_in_browser=True", "--LabApp.news_url=None",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    else:
        cmd += ["--JupyterNotebookApp.expose_app_in_browser=True"]
    log = open(base / "lab.log", "wb")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    lab = Lab(root, port, token, proc, env, app)
    try:
        deadline = time.time() + timeout
        while True:
            try:
                lab.api("/api/status")
                break
            except Exception:
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError("JupyterLab did not start:\n" + (base / "lab.log").read_text()[-3000:])
                time.sleep(0.3)
        yield lab
    finally:
        kernel_pids = _kernel_pids(lab)
        try:
            lab.api("/api/shutdown", method="POST")
        except Exception:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        for pid in kernel_pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        log.close()
        shutil.rmtree(base, ignore_errors=True)


def _kernel_pids(lab: Lab) -> list[int]:
    """Kernels run in their own process group: find them to end them by pid."""
    out = subprocess.run(["pgrep", "-f", "ipykernel_launcher"], capture_output=True, text=True)
    pids = []
    for line in out.stdout.split():
        try:
            pid = int(line)
            env = Path(f"/proc/{pid}/environ").read_bytes()
            if lab.env["JUPYTER_RUNTIME_DIR"].encode() in env:
                pids.append(pid)
        except (ValueError, OSError):
            pass
    return pids


@contextmanager
def browser(width: int = 1400, height: int = 1000, javascript: bool = True) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="nbprof-chromium-")
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": width, "height": height}, java_script_enabled=javascript,
        )
        try:
            yield context
        finally:
            context.close()
            shutil.rmtree(profile, ignore_errors=True)


def open_notebook(context, lab: Lab, name: str):
    page = context.new_page()
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("http://127.0.0.1")
               else route.abort())
    path = f"/lab/tree/{name}?token={lab.token}&reset" if lab.app == "lab" else f"/notebooks/{name}?token={lab.token}"
    page.goto(lab.url + path, wait_until="domcontentloaded")
    page.wait_for_function(
        "() => window.jupyterapp && window.jupyterapp.shell.currentWidget && "
        "window.jupyterapp.shell.currentWidget.sessionContext && "
        "window.jupyterapp.shell.currentWidget.sessionContext.session && "
        "window.jupyterapp.shell.currentWidget.sessionContext.session.kernel && "
        "window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status === 'idle'",
        timeout=60_000,
    )
    return page


RUN_DONE = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  const k = w.sessionContext.session.kernel;
  if (k.status !== 'idle') return false;
  const cells = w.content.widgets.filter(c => c.model.type === 'code');
  const prompts = [...document.querySelectorAll('.jp-InputPrompt')].map(p => p.textContent);
  if (prompts.some(t => t.includes('*'))) return false;
  const errored = cells.some(c => c.model.outputs.toJSON().some(o => o.output_type === 'error'));
  return errored || cells.every(c => c.model.executionCount !== null);
}"""


def run_all(page, timeout_s: float = 240) -> None:
    # Do not await: the promise resolves only when every cell ends.
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    time.sleep(1.0)
    page.wait_for_function(RUN_DONE, timeout=timeout_s * 1000)


def cell_outputs(page) -> list[list[dict]]:
    return page.evaluate(
        "() => window.jupyterapp.shell.currentWidget.content.widgets"
        ".filter(c => c.model.type === 'code').map(c => c.model.outputs.toJSON())"
    )


def kernel_eval(page, code: str, timeout_s: float = 30) -> str:
    """Run code in the notebook's kernel without adding a cell; return its stdout."""
    return page.evaluate(
        """async (code) => {
            const k = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
            const future = k.requestExecute({code, silent: false, store_history: false});
            let out = '';
            future.onIOPub = (msg) => { if (msg.header.msg_type === 'stream') out += msg.content.text; };
            await future.done;
            return out;
        }""",
        code,
    )


def shutdown_kernel(page) -> None:
    """Stop the notebook's kernel now (it would otherwise live, with its memory, until the server stops)."""
    page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.shutdown()")


def full_screenshot(page, path: str) -> None:
    """Lab scrolls inside its own panel: collapse the sidebars, grow the viewport, shoot."""
    page.evaluate("() => { try { window.jupyterapp.commands.execute('application:toggle-left-area'); } catch (e) {} }")
    height = page.evaluate(
        "() => { const el = document.querySelector('.jp-WindowedPanel-outer') || document.querySelector('.jp-Notebook');"
        " return el ? el.scrollHeight + 200 : 2000; }"
    )
    page.set_viewport_size({"width": page.viewport_size["width"], "height": min(int(height), 16000)})
    time.sleep(0.8)
    page.screenshot(path=path, full_page=True)
