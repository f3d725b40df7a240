"""Lichtblick, built from source, reads the Foxglove export and watches the live viewer in a headless Chromium.

Runs where ``BERTHSIM_LICHTBLICK_DIST`` names a built Lichtblick web app (the ``web/.webpack``
directory ``yarn web:build:prod`` writes, with its ``index.html``), Chromium is at
``/usr/bin/chromium`` (or ``BERTHSIM_CHROMIUM``) and Python's ``playwright`` is installed
(extra ``browser``); otherwise it is skipped, saying which is missing. The browser is Chromium
itself, headless, driven through playwright with a fresh profile; the app and the files are
served on loopback by a small HTTP server with range requests (Lichtblick's remote-file
source reads MCAP by ranges and refuses a server without ``Accept-Ranges: bytes``).

- Export: one short lockstep run with the capture in it
  (:func:`tests.services.test_export_foxglove.record_capture_run`), exported through
  ``launch.py export --format foxglove``, opened by URL (``?ds=remote-file&ds.url=…&time=…``),
  with ``configs/foxglove_layout.json`` imported through the app's own *Import layout from
  file…* (the browser's file picker answered with the layout). Each plot panel's legend,
  with ``showPlotValuesInLegend`` on, shows every series' value at the seek time: each is the
  raw log's component (``mcap`` + ``msgpack``) of the last sample at or before that time, bit
  for bit (JavaScript prints a number's shortest round-trip form). The event log panel shows
  the capture command; the 3D panels draw on a canvas and report no problem.
- Live: the same layout, then ``?ds=foxglove-websocket&ds.url=ws://127.0.0.1:PORT`` against a
  run paced at real time with a ``viewer`` service. The plot legends fill with values while
  the run goes, and each value shown is one the run logged for that field.

``BERTHSIM_LICHTBLICK_SHOTS=DIR`` also saves a 1280x720 PNG of each view there (the pictures
in ``docs/images/`` were made so).
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
LAYOUT = ROOT / "configs" / "foxglove_layout.json"
DIST = os.environ.get("BERTHSIM_LICHTBLICK_DIST", "")
CHROMIUM = os.environ.get("BERTHSIM_CHROMIUM", "/usr/bin/chromium")
SHOTS = os.environ.get("BERTHSIM_LICHTBLICK_SHOTS", "")
# Chromium headless, no GPU (WebGL through SwiftShader, for the 3D panels), nothing fetched from outside
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--use-angle=swiftshader", "--enable-unsafe-swiftshader",
                 "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1280, "height": 720}
T_SEEK = 1.005  # s of simulation time, between two samples: just after the capture (the contact force's sample at 1 s)


def _skip_reason() -> str | None:
    if not DIST:
        return "BERTHSIM_LICHTBLICK_DIST is not set (a built Lichtblick web app: web/.webpack of yarn web:build:prod)"
    if not (Path(DIST) / "index.html").is_file():
        return f"BERTHSIM_LICHTBLICK_DIST={DIST!r} has no index.html"
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        return f"no Chromium at {CHROMIUM!r} (BERTHSIM_CHROMIUM)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[browser]')"
    return None


pytest.importorskip("mcap_protobuf", reason="the Foxglove export needs the export extra")
if (_reason := _skip_reason()) is not None:
    pytest.skip(_reason, allow_module_level=True)

from playwright.sync_api import BrowserContext, Page, sync_playwright  # noqa: E402

from tests.services.test_export_foxglove import (  # noqa: E402
    T_LATE,
    export_cli,
    f8,
    raw_messages,
    record_capture_run,
)
from tests.test_main_job import late_start_config  # noqa: E402


# ---------------------------------------------------------------- a static server with range requests
class _Handler(SimpleHTTPRequestHandler):
    """``/`` the app (``DIST``), ``/data/…`` the directory of the files; ``Range: bytes=a-b`` answered with 206."""

    data_dir: Path

    def translate_path(self, path: str) -> str:
        path = path.split("?", 1)[0].split("#", 1)[0]
        if path.startswith("/data/"):
            return str(self.data_dir / Path(path[len("/data/"):]).name)
        return super().translate_path(path)

    def end_headers(self) -> None:
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Access-Control-Expose-Headers", "Accept-Ranges, Content-Range, Content-Length")
        super().end_headers()

    def send_head(self):  # type: ignore[no-untyped-def]
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        path = Path(self.translate_path(self.path))
        if m is None or not path.is_file():
            return super().send_head()
        size = path.stat().st_size
        start, end = int(m[1]), min(int(m[2]) if m[2] else size - 1, size - 1)
        if start >= size or end < start:
            self.send_error(416, f"Range {self.headers['Range']!r} outside a file of {size} bytes")
            return None
        f = path.open("rb")
        f.seek(start)
        self.send_response(206)
        self.send_header("Content-Type", self.guess_type(str(path)))
        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        self._remaining = end - start + 1
        return f

    def copyfile(self, source, outputfile) -> None:  # type: ignore[no-untyped-def]
        n = getattr(self, "_remaining", None)
        if n is None:
            return super().copyfile(source, outputfile)
        outputfile.write(source.read(n))
        self._remaining = None

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(base URL of the app, directory served under ``/data/``)."""
    data = tmp_path_factory.mktemp("served")
    handler = type("Handler", (_Handler,), {"data_dir": data})

    def make(*a: Any, **k: Any) -> _Handler:
        return handler(*a, directory=DIST, **k)

    server = ThreadingHTTPServer(("127.0.0.1", 0), make)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", data
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture()
def browser(tmp_path: Path) -> Iterator[BrowserContext]:
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True,
                                                   args=CHROMIUM_ARGS, viewport=VIEWPORT)
        try:
            yield ctx
        finally:
            ctx.close()


# ---------------------------------------------------------------- driving the app
def _layout_with_values() -> dict:
    """``configs/foxglove_layout.json`` with each plot's legend showing its series' current values."""
    layout = json.loads(LAYOUT.read_text())
    for key, cfg in layout["configById"].items():
        if key.startswith("Plot!"):
            cfg["showPlotValuesInLegend"] = True
    return layout


def _open_app(page: Page, base: str) -> None:
    """The app without a source; its welcome dialog (shown to a fresh profile once it has started) closed."""
    page.goto(base + "/", timeout=120_000)
    dialog = page.get_by_test_id("DataSourceDialog")
    dialog.wait_for(state="visible", timeout=120_000)
    page.keyboard.press("Escape")
    dialog.wait_for(state="hidden", timeout=30_000)


def _import_layout(page: Page, layout: dict) -> None:
    """The app's *View → Import layout from file…*, the file picker answering with ``layout``."""
    page.evaluate("""(text) => {
        window.showOpenFilePicker = async () => [{
            kind: "file", name: "berthsim.json",
            getFile: async () => new File([text], "berthsim.json", {type: "application/json"}),
        }];
    }""", json.dumps(layout))
    page.get_by_test_id("AppMenuButton").click()
    page.get_by_text("View", exact=True).click()
    page.get_by_text("Import layout from file…").click()
    page.wait_for_selector('[data-testid~="Plot!contactforce"]', timeout=60_000)


def _panel(page: Page, panel_id: str) -> Any:
    return page.locator(f'[data-testid~="{panel_id}"]')


def _legend_values(page: Page, panel_id: str) -> dict[str, str]:
    """label -> the value text beside it in a plot panel's legend (rows without a value left out)."""
    return page.evaluate("""(panelId) => {
        const panel = document.querySelector(`[data-testid~="${panelId}"]`);
        const out = {};
        if (!panel) return out;
        for (const cb of panel.querySelectorAll('input[type=checkbox]')) {
            let row = cb.parentElement;
            while (row && row.parentElement && row.children.length < 3) row = row.parentElement;
            if (!row) continue;
            const cells = Array.from(row.children).map((c) => c.textContent.trim());
            if (cells.length >= 3 && cells[1] && cells[2]) out[cells[1]] = cells[2];
        }
        return out;
    }""", panel_id)


def _series(layout: dict, panel_id: str) -> list[tuple[str, str, str, int]]:
    """(label, topic, field, index) of each series of a plot panel, from paths like ``/contact/wrench.F_Lo_W[3]``."""
    out = []
    for p in layout["configById"][panel_id]["paths"]:
        m = re.fullmatch(r"/([\w/]+)\.(\w+)\[(\d+)\]", p["value"])
        assert m is not None, p["value"]
        out.append((p["label"], m[1], m[2], int(m[3])))
    return out


def _wait(cond: Any, timeout_s: float, what: str) -> Any:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        got = cond()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def _shot(page: Page, name: str, shipped_layout: bool) -> None:
    """With ``BERTHSIM_LICHTBLICK_SHOTS``: a PNG, left sidebar closed, in the shipped layout or with legend values."""
    if not SHOTS:
        return
    if shipped_layout:
        _import_layout(page, json.loads(LAYOUT.read_text()))
    if page.get_by_test_id("left-sidebar-button").get_attribute("aria-label") == "Hide left sidebar":
        page.get_by_test_id("left-sidebar-button").click()
    if page.get_by_test_id("progress-plot").count():
        page.get_by_test_id("progress-plot").wait_for(state="hidden", timeout=120_000)
    page.mouse.move(VIEWPORT["width"] // 2, VIEWPORT["height"] - 10)  # no tooltip in the picture
    page.wait_for_timeout(10_000 if shipped_layout else 2000)  # the file's plots fill as the app reads it
    Path(SHOTS).mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(Path(SHOTS) / name))


def _problems(page: Page) -> list[str]:
    """Texts of the app's error alerts and of the 3D panels' error overlays."""
    return page.evaluate("""() => Array.from(document.querySelectorAll('[role=alert], .MuiAlert-standardError'))
        .map((e) => e.textContent.trim()).filter((t) => t)""")


PLOTS = ("Plot!contactforce", "Plot!jointtorques", "Plot!rigleg")


# ---------------------------------------------------------------- the export, opened by URL
def test_the_export_opens_in_lichtblick_and_its_panels_show_the_logged_values(
        served: tuple[str, Path], browser: BrowserContext, tmp_path: Path) -> None:
    base, data = served
    log, _ = record_capture_run(tmp_path)
    export, _ = export_cli(log, "foxglove")
    shutil.copy(export, data / "run.foxglove.mcap")
    raw = raw_messages(log)
    layout = _layout_with_values()

    page = browser.new_page()
    _open_app(page, base)
    _import_layout(page, layout)
    t_seek = (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=T_SEEK)).strftime("%Y-%m-%dT%H:%M:%S.%f") + "Z"
    page.goto(f"{base}/?ds=remote-file&ds.url={base}/data/run.foxglove.mcap&time={t_seek}", timeout=120_000)

    t_ns = round(T_SEEK * 1e9)
    for panel_id in PLOTS:
        series = _series(layout, panel_id)

        def filled(pid: str = panel_id, n: int = len(series)) -> dict[str, str] | None:  # noqa: B008
            v = _legend_values(page, pid)
            return v if len(v) >= n else None

        shown = _wait(filled, 120.0, f"the values in {panel_id}'s legend")
        for label, topic, field, i in series:
            env = [e for _, _, e in raw[topic] if e[3] <= t_ns][-1]
            assert float(shown[label]) == f8(env[6][field])[i], (panel_id, label, shown[label], env[3])
    # the event log shows the capture; the 3D panels draw and nothing is reported wrong
    _wait(lambda: "capture" in _panel(page, "RosOut!events").inner_text(), 60.0, "the capture in the event log")
    for panel_id in ("3D!berthing", "3D!rig"):
        assert _panel(page, panel_id).locator("canvas").count() >= 1, panel_id
    assert _problems(page) == []
    _shot(page, "lichtblick_export.png", shipped_layout=True)


# ---------------------------------------------------------------- a live run through the viewer
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_lichtblick_watches_a_live_run_through_the_viewer(
        served: tuple[str, Path], browser: BrowserContext, tmp_path: Path) -> None:
    import tomli_w

    base, _ = served
    port = _free_port()
    cfg = copy.deepcopy(late_start_config(T_LATE))
    cfg["services"]["viewer"] = {"kind": "viewer", "rate_hz": 50, "port": port, "display_hz": 30.0}
    cfg["sim"]["speed"] = 1.0
    (tmp_path / "live.toml").write_bytes(tomli_w.dumps(cfg).encode())
    layout = _layout_with_values()

    page = browser.new_page()
    _open_app(page, base)
    _import_layout(page, layout)  # before the run: the app keeps the layout for the next source

    env = {**os.environ, "PYTHONPATH": str(ROOT), "BERTHSIM_NO_PROGRESS": "1"}
    run = subprocess.Popen([sys.executable, str(ROOT / "launch.py"), "run", str(tmp_path / "live.toml"),
                            "--duration", "20", "--log", str(tmp_path / "live.mcap"), "--no-report"],
                           cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        page.goto(f"{base}/?ds=foxglove-websocket&ds.url=ws://127.0.0.1:{port}", timeout=120_000)
        shown = {pid: _wait(lambda pid=pid: _legend_values(page, pid), 240.0, f"live values in {pid}'s legend")
                 for pid in ("Plot!jointtorques", "Plot!rigleg")}
        _shot(page, "lichtblick_live.png", shipped_layout=False)
        _, err = run.communicate(timeout=600)
    finally:
        run.kill()
    assert run.returncode == 0, err[-3000:]
    raw = raw_messages(tmp_path / "live.mcap")
    for panel_id, values in shown.items():
        for label, topic, field, i in _series(layout, panel_id):
            if label in values:
                logged = {float(f8(e[6][field])[i]) for _, _, e in raw[topic]}
                assert float(values[label]) in logged, (panel_id, label, values[label])
        assert values, panel_id
