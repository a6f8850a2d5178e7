"""The A/B tab in a real browser: Debian's Chromium, headless, driven by Selenium through chromedriver.

Opens the UI served by `sglab ui --target sim`, starts a swarm from Locust's own form, opens the A/B
tab and checks both arms stream tokens and only the candidate shows an accept length. The screenshot
is saved as test-output/ui/ab-tab.png for people to look at.
"""

from __future__ import annotations

import contextlib
import functools
import html
import http.server
import os
import shutil
import subprocess
import tempfile
import threading
import time

import httpx
import pytest

from sglab.results.store import list_runs, load_result

from .harness import REST_HEADERS, ROOT, STACK, free_port, sglab_ui, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--disable-quic", "--window-size=1600,1000")

ROWS_JS = """
const table = document.querySelector('table');
if (!table) return null;
const head = [...table.querySelectorAll('thead th')].map(th => th.innerText.replace(/\\s+/g, ' ').trim());
const rows = [...table.querySelectorAll('tbody tr')].map(tr => [...tr.cells].map(td => td.innerText.trim()));
return {head, rows};
"""

PLOT_JS = """
const line = document.querySelector('#sglab-ab-plot-svg #sglab-ab-gain');
if (!line) return null;
const points = line.getAttribute('points').trim().split(/\\s+/).length;
return points >= 2 ? {points, title: document.querySelector('#sglab-ab-plot-svg text').textContent} : null;
"""


def _browser_available() -> str | None:
    """None when Chromium and chromedriver are there (installing them with tools/install-browser.sh if needed)."""
    if os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK):
        return None
    script = ROOT / "tools" / "install-browser.sh"
    out = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=900)
    if out.returncode == 0 and os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK):
        return None
    return f"{CHROMIUM} / {CHROMEDRIVER} absent and tools/install-browser.sh could not install them: " \
           f"{(out.stderr or out.stdout).strip()[-300:]}"


@pytest.fixture
def browser(tmp_path):
    reason = _browser_available()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the browser test: {reason}")
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="chromium-profile-", dir=tmp_path)
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def _number(cell: str) -> float | None:
    try:
        return float(cell)
    except ValueError:
        return None


def test_ab_tab_in_chromium(tmp_path, browser, output_dir):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    with sglab_ui(tmp_path, "--target", "sim") as ui:
        browser.get(ui.url + "/")
        users = wait_until(lambda: browser.find_element(By.NAME, "userCount"), 30, "Locust's start form")
        for name, value in (("userCount", "2"), ("spawnRate", "2")):
            field = browser.find_element(By.NAME, name)
            field.send_keys(Keys.CONTROL, "a")  # clear() bypasses React's onChange; select and type over
            field.send_keys(Keys.BACKSPACE, value)
        assert users.get_attribute("value") == "2"

        browser.find_element(By.XPATH, "//button[contains(., 'Advanced options')]").click()
        for arm in ("baseline", "candidate"):
            field = wait_until(lambda a=arm: browser.find_element(By.NAME, f"{a}Url"), 10, f"the {arm} URL field")
            assert field.get_attribute("value") == ui.arm_urls[arm], "arm URLs must be prefilled in the form"

        def click_start():
            button = browser.find_element(By.XPATH, "//button[@type='submit']")
            browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", button)
            button.click()  # retried while the accordion is still animating over it
            return True

        wait_until(click_start, 15, "the START button to be clickable")
        clicked_at = [time.monotonic()]

        def running():
            """RUNNING shows after the next stats poll; a click the still-animating form swallowed is clicked
            again once the form has stood still for 10 s (a loaded machine)."""
            if "RUNNING" in browser.find_element(By.TAG_NAME, "body").text.upper():
                return True
            if time.monotonic() - clicked_at[0] > 10 and browser.find_elements(By.XPATH, "//button[@type='submit']"):
                click_start()
                clicked_at[0] = time.monotonic()
            return False

        wait_until(running, 60, "the test to run")

        wait_until(lambda: browser.find_element(By.XPATH, "//*[@role='tab'][normalize-space(.)='A/B']"), 10,
                   "the A/B tab").click()

        def table_with_gain():
            table = browser.execute_script(ROWS_JS)
            if not table or len(table["rows"]) < 3:
                return None
            rows = {row[0]: dict(zip(table["head"], row)) for row in table["rows"]}
            decode_gain = rows.get("candidate vs baseline", {}).get("Decode tok/s (mean)", "")
            return rows if "[" in decode_gain and "[n/a" not in decode_gain else None

        rows = wait_until(table_with_gain, 90, "both arms and a gain with its CI in the A/B tab", 1.0)
        # the live gain plot above the table: an SVG line over the pseudo-rounds, drawn from /sglab/plot.json
        plot = wait_until(lambda: browser.execute_script(PLOT_JS), 30, "the gain plot in the A/B tab", 1.0)
        assert plot["points"] >= 2 and "confidence sequence" in plot["title"], plot
        browser.save_screenshot(str(tmp_path / "ab-tab.png"))
        shutil.copy(tmp_path / "ab-tab.png", output_dir / "ab-tab.png")

        baseline, candidate = rows["baseline"], rows["candidate"]
        for row in (baseline, candidate):
            assert (_number(row["Decode tok/s (mean)"]) or 0) > 0, row
            assert (_number(row["Output tok/s (aggregate)"]) or 0) > 0, row
        assert baseline["Accept length (client)"] == "" and baseline["Accept length (server)"] == ""
        assert (_number(candidate["Accept length (client)"]) or 0) > 1.0, candidate
        assert (_number(candidate["Accept length (server)"]) or 0) > 1.0, candidate
        verdict = rows["candidate vs baseline"]["Gain [95% CI] / verdict"]
        assert verdict.split(":")[0] in ("promote", "reject", "inconclusive"), verdict

        browser.find_element(By.XPATH, "//*[@role='tab'][contains(., 'ownload')]").click()
        link = wait_until(lambda: browser.find_element(By.PARTIAL_LINK_TEXT, "sglab result JSON"), 10,
                          "the result download link")
        assert link.get_attribute("href").endswith("/sglab/result.json")

    # shut down (SIGTERM) while the test was running: the run was stopped and saved, complete
    runs = list_runs(STACK, ui.results_dir)
    assert len(runs) == 1, ui.log()
    saved = load_result(runs[0])
    assert f"saved interactive run: {runs[0] / 'result.json'}" in ui.log()
    assert saved.kind == "interactive" and saved.complete


def test_open_loop_rate_run_in_chromium(tmp_path, browser, monkeypatch):
    """`--profile rate`: Locust's form has no user count (the shape sets it), START runs the schedule, and the A/B
    tab names the level by the profile's label (a rate) with the arrivals column."""
    from selenium.webdriver.common.by import By

    from .test_open_loop import RATE, RATE_LOAD, _stack

    stack, env = _stack(tmp_path, monkeypatch, "ui-rate-browser", RATE_LOAD, gated=[RATE])
    with sglab_ui(tmp_path, "--target", "sim", "--stack", stack, env=env) as ui:
        browser.get(ui.url + "/")
        button = wait_until(lambda: browser.find_element(By.XPATH, "//button[@type='submit']"), 30,
                            "Locust's start form")
        users = wait_until(lambda: browser.find_element(By.NAME, "userCount"), 30, "the form's user count")
        assert users.get_attribute("value") == "8", "the form shows the in-flight cap as its users"
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", button)
        wait_until(lambda: button.click() or True, 15, "the START button to be clickable")
        wait_until(lambda: browser.find_element(By.XPATH, "//*[@role='tab'][normalize-space(.)='A/B']"), 30,
                   "the A/B tab").click()

        def rate_rows():
            table = browser.execute_script(ROWS_JS)
            if not table or len(table["rows"]) < 3:
                return None
            rows = {row[0]: dict(zip(table["head"], row)) for row in table["rows"]}
            return (table["head"], rows) if "baseline" in rows else None

        head, rows = wait_until(rate_rows, 90, "the open-loop rows in the A/B tab", 1.0)
        assert "Rate (req/s)" in head and rows["baseline"]["Rate (req/s)"] == f"{RATE} req/s", (head, rows)
        assert rows["baseline"]["Users (in-flight cap)"] == "8"
        assert any(h.startswith("Arrivals") for h in head) and rows["baseline"][
            next(h for h in head if h.startswith("Arrivals"))].startswith("late ")
        browser.save_screenshot(str(tmp_path / "ab-tab-rate.png"))


ATTACK_PAGE = """<!doctype html><title>{name}</title>
<form id="attack" method="POST" action="{action}">{fields}</form>
<script>document.getElementById('attack').submit()</script>
"""


@contextlib.contextmanager
def other_site(tmp_path, pages: dict[str, tuple[str, dict[str, str]]]):
    """A second localhost origin (another port) serving pages that auto-submit a form to the UI."""
    root = tmp_path / "other-site"
    root.mkdir()
    for name, (action, fields) in pages.items():
        inputs = "".join(f'<input name="{html.escape(k)}" value="{html.escape(v)}">' for k, v in fields.items())
        (root / name).write_text(ATTACK_PAGE.format(name=name, action=html.escape(action), fields=inputs))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://localhost:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_form_on_another_origin_cannot_start_or_stop_a_test(tmp_path, browser):
    """The issue-13 attack in a real browser: a page on another localhost port posts Locust's form with a
    swapped candidate URL, then posts STOP. Neither reaches the runner."""
    with sglab_ui(tmp_path, "--target", "sim") as ui:
        attack = {"user_count": "2", "spawn_rate": "2", "candidate_url": "http://127.0.0.1:9"}
        pages = {"swarm.html": (ui.url + "/swarm", attack), "stop.html": (ui.url + "/stop", {})}
        with other_site(tmp_path, pages) as site:
            browser.get(site + "/swarm.html")
            wait_until(lambda: "refused" in browser.page_source, 30, "the UI's refusal in the browser")
            assert "cross-site" in browser.page_source
            stats = httpx.get(ui.url + "/stats/requests", timeout=10).json()
            assert stats["state"] == "ready" and httpx.get(ui.url + "/sglab/result.json", timeout=10).status_code == 404

            assert httpx.post(ui.url + "/swarm", data={"user_count": 2, "spawn_rate": 2}, headers=REST_HEADERS,
                              timeout=10).json()["success"]
            wait_until(lambda: httpx.get(ui.url + "/stats/requests", timeout=10).json()["state"] == "running", 30,
                       "the test to run")
            browser.get(site + "/stop.html")
            wait_until(lambda: "refused" in browser.page_source, 30, "the UI's refusal of the cross-site STOP")
            assert httpx.get(ui.url + "/stats/requests", timeout=10).json()["state"] == "running"

    runs = list_runs(STACK, ui.results_dir)  # saved at shutdown: the stack's own simulators, nothing else
    assert len(runs) == 1, ui.log()
    saved = load_result(runs[0])
    assert saved.target.kind == "sim" and saved.target.urls == ui.arm_urls and saved.target.urls_source == "sglab"
