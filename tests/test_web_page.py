"""The /web page in a real browser: headless Chromium (Debian's) driven through its chromedriver.

A person's episode is played by clicking, against our real server; an agent's results file (written
by the evaluation code inference.py uses) is replayed; two tabs play at once; HTML in a log line
stays text. Screenshots go to test-artifacts/web/. `make test` installs Chromium with apt-get;
where it cannot be installed these tests skip and say so.
"""

from __future__ import annotations

import base64
import functools
import http.server
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec
import pytest
from browser_support import WAIT_S

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.models import InspectLogs, InspectMetrics
from service_incident.tasks import TASKS

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts" / "web"
DESKTOP, PHONE = (1280, 900), (390, 844)

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is missing: pip install -e '.[test]'")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

# --- the browser --------------------------------------------------------------------------------


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """The browser with one tab; afterwards extra tabs are closed and the page left (closing its socket)."""
    first = browser.window_handles[0]
    browser.switch_to.window(first)
    browser.get_log("performance")  # drop what earlier tests left
    try:
        yield browser
    finally:
        errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
        for handle in browser.window_handles[1:]:
            browser.switch_to.window(handle)
            browser.close()
        browser.switch_to.window(first)
        browser.get("about:blank")
        assert not errors, f"errors in the page's console: {errors}"


def wait(driver: Any, condition: Callable[[Any], Any], timeout: float = WAIT_S) -> Any:
    return WebDriverWait(driver, timeout).until(condition)


def open_page(driver: Any, url: str) -> None:
    driver.get(url)
    wait(driver, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true")


def text(driver: Any, css: str) -> str:
    """An element's text as the page wrote it (textContent: no CSS text-transform applied)."""
    return driver.find_element(By.CSS_SELECTOR, css).get_attribute("textContent").strip()


def texts(driver: Any, css: str) -> list[str]:
    return [e.get_attribute("textContent").strip() for e in driver.find_elements(By.CSS_SELECTOR, css)]


def screenshot(driver: Any, name: str, size: tuple[int, int] = DESKTOP) -> Path:
    """A full-page PNG at this viewport size (phone width emulated as a mobile device)."""
    width, height = size

    def emulate(tall: int) -> None:
        metrics = {"width": width, "height": tall, "deviceScaleFactor": 1, "mobile": width < 600}
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)

    emulate(height)
    try:
        wait(driver, lambda d: d.execute_script("return window.innerWidth") == width)
        time.sleep(0.1)  # the page lays the graph out again on resize
        # A viewport as tall as the page: capturing beyond the viewport leaves scrolled boxes blank.
        emulate(max(height, driver.execute_script("return document.documentElement.scrollHeight")))
        time.sleep(0.1)
        shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png"})
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    path.write_bytes(base64.b64decode(shot["data"]))
    return path


def frames_received(driver: Any) -> list[dict[str, Any]]:
    """The WebSocket frames the server sent to the page since the last call, decoded."""
    frames = []
    for entry in driver.get_log("performance"):
        event = json.loads(entry["message"])["message"]
        if event["method"] == "Network.webSocketFrameReceived":
            frames.append(json.loads(event["params"]["response"]["payloadData"]))
    return frames


def signed(value: float) -> str:
    """The page's reward format."""
    if abs(value) < 0.005:
        return "0.00"
    return f"+{value:.2f}" if value > 0 else f"{value:.2f}"


def active_sessions(base_url: str) -> int:
    return httpx.get(f"{base_url}/health", timeout=5).json()["active_sessions"]


def wait_sessions(base_url: str, expected: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while (active := active_sessions(base_url)) != expected:
        assert time.monotonic() < deadline, f"{active} active sessions, expected {expected}"
        time.sleep(0.05)


# --- playing ------------------------------------------------------------------------------------


def start_episode(driver: Any, task: str, incident: str, seed: int) -> None:
    Select(driver.find_element(By.ID, "task")).select_by_value(task)
    Select(driver.find_element(By.ID, "incident")).select_by_value(incident)
    seed_box = driver.find_element(By.ID, "seed")
    seed_box.clear()
    seed_box.send_keys(str(seed))
    driver.find_element(By.ID, "start").click()
    wait(driver, lambda d: text(d, "#stat-incident") == f"{task} / {incident}" and text(d, "#stat-step")[0] == "0")


def service_names(driver: Any) -> list[str]:
    return [chip.get_attribute("data-service") for chip in driver.find_elements(By.CSS_SELECTOR, "#service-list .chip")]


def click_service(driver: Any, service: str) -> None:
    driver.find_element(By.CSS_SELECTOR, f'#graph g[data-service="{service}"]').click()
    wait(driver, lambda d: text(d, "#selected") == service)


def take(driver: Any, action: str) -> None:
    """Click an action button and wait for the server's answer to show in the timeline."""
    before = len(driver.find_elements(By.CSS_SELECTOR, "#timeline li"))
    driver.find_element(By.CSS_SELECTOR, f'button[data-action="{action}"]').click()
    wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#timeline li")) == before + 1)


def postmortem_shown(driver: Any) -> dict[str, Any]:
    """The postmortem box as the page shows it: its column heads, a row of cells per root cause, the
    severity line; empty when the box is hidden or holds no table."""
    if not driver.find_element(By.ID, "postmortem").is_displayed():
        return {}
    rows = driver.find_elements(By.CSS_SELECTOR, "#postmortem .roots tbody tr")
    return {
        "head": texts(driver, "#postmortem .roots thead th"),
        "rows": [
            [c.get_attribute("textContent").strip() for c in r.find_elements(By.CSS_SELECTOR, "th, td")] for r in rows
        ],
        "severity": texts(driver, "#postmortem .pm-severity"),
    }


def postmortem_expected(report: dict[str, Any]) -> dict[str, Any]:
    """What the page must show of a postmortem: per root cause, named and fixed and each credit."""
    roots = report["root_causes"]
    parts = list(dict.fromkeys(part for root in roots for part in root["credited"]))
    yes = {True: "yes", False: "no"}
    severity = []
    if report["severity"]:
        severity = [
            f"severity expected: {report['severity']}, declared {report['declared_severity'] or 'none'}. "
            f"{report['severity_basis']}"
        ]
    return {
        "head": ["root cause", "fault", "fixes", "named", "fixed", *(f"{p.replace('_', ' ')} credited" for p in parts)],
        "rows": [
            [
                r["service"],
                r["fault"],
                ", ".join(r["fixes"]),
                yes[r["named"]],
                yes[r["fixed"]],
                *(f"{r['credited'][p]:.3f}" for p in parts),
            ]
            for r in roots
        ],
        "severity": severity,
    }


def test_a_person_plays_a_triage_incident_to_the_end_by_clicking(page: Any, server_url: str) -> None:
    open_page(page, f"{server_url}/")  # the root redirects to the page
    assert page.current_url == f"{server_url}/web/"
    start_episode(page, "easy", "easy_001", 42)
    assert text(page, "#conn") == "session open"
    services = service_names(page)
    paged = texts(page, "#alerts .svc")[0]
    # Only the task's actions are offered.
    offered = {b.get_attribute("data-action") for b in page.find_elements(By.CSS_SELECTOR, "#act button[data-action]")}
    assert offered == set(TASKS["easy"].actions)

    click_service(page, paged)
    take(page, "inspect_logs")
    log = page.find_element(By.CSS_SELECTOR, f'#logs .block[data-service="{paged}"] pre.log')
    assert log.find_elements(By.CSS_SELECTOR, ".lvl")  # level words are picked out (and coloured)
    suspect = next(name for name in reversed(services) if name != paged)
    click_service(page, suspect)
    take(page, "inspect_metrics")
    assert texts(page, "#metrics tbody th") == [suspect]
    assert text(page, "#stat-step") == "2 / 3"
    assert text(page, "#stat-sla").endswith("min") and "UTC" in text(page, "#stat-clock")
    assert postmortem_shown(page) == {} and not page.find_elements(By.CSS_SELECTOR, "#postmortem *")

    page.find_element(By.CSS_SELECTOR, f'#rc-list input[value="{suspect}"]').click()
    page.find_element(By.CSS_SELECTOR, '#severity input[value="P0"] + span').click()
    assert text(page, 'button[data-action="declare"]') == f"Declare {suspect} P0"
    take(page, "declare")
    wait(page, lambda d: d.find_element(By.ID, "result").is_displayed())

    observations = [f["data"] for f in frames_received(page) if f["type"] == "observation"]
    assert len(observations) == 4  # the reset and three steps
    final = observations[-1]
    assert final["done"] is True and final["observation"]["score"] is not None
    assert text(page, "#score-value") == f"{final['observation']['score']:.4f}"
    shown = dict(zip(texts(page, "#breakdown th"), texts(page, "#breakdown td.val"), strict=True))
    assert shown == {k.replace("_", " "): signed(v) for k, v in final["observation"]["breakdown"].items()}
    report = final["observation"]["postmortem"]
    assert postmortem_shown(page) == postmortem_expected(report)
    assert report["declared"] == [suspect] and report["declared_severity"] == "P0"
    assert texts(page, "#timeline .reward") == [signed(o["reward"]) for o in observations[1:]]
    assert text(page, "#stat-reward") == signed(final["reward"])
    # The episode is over: nothing more can be sent.
    assert all(not b.is_enabled() for b in page.find_elements(By.CSS_SELECTOR, "#act button[data-action]"))

    screenshot(page, "play-triage-desktop")
    screenshot(page, "play-triage-phone", PHONE)


# --- replaying ----------------------------------------------------------------------------------


def results(base_url: str, task_ids: tuple[str, ...]) -> list[Any]:
    """Episode records of the expert agent, played over the real server by the evaluation code."""
    from service_incident.harness.evaluation import evaluate, plan, reference_policy

    specs = plan([TASKS[task_id] for task_id in task_ids], episodes=1)

    async def run() -> list[Any]:
        return await evaluate(reference_policy("expert"), specs, agent="expert", base_url=base_url)

    return anyio.run(run)


def write_results(path: Path, records: list[Any]) -> Path:
    """The file inference.py writes: one encoded record a line, which `decode` reads back."""
    from service_incident.harness.evaluation import decode, encode

    path.write_bytes(b"".join(encode(record) for record in records))
    assert [r.name for r in decode(path.read_bytes())] == [r.name for r in records]
    return path


def test_an_agent_run_is_replayed_step_by_step_from_its_results_file(
    page: Any, server_url: str, tmp_path: Path
) -> None:
    records = results(server_url, ("easy", "medium_incident_triage"))
    path = write_results(tmp_path / "episodes.jsonl", records)
    open_page(page, f"{server_url}/web/")
    page.find_element(By.ID, "mode-replay").click()
    page.find_element(By.ID, "replay-file").send_keys(str(path))
    wait(page, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#replay-episode option")) == len(records))

    record = records[1]
    Select(page.find_element(By.ID, "replay-episode")).select_by_value("1")
    wait(page, lambda d: text(d, "#stat-incident") == f"{record.task} / {record.incident}")
    assert not page.find_element(By.ID, "act").is_displayed()  # a replay is watched, not played
    observations = [record.reset, *(step.observation for step in record.trace)]
    for index, observation in enumerate(observations):
        if index:
            page.find_element(By.ID, "replay-next").click()
        wait(page, lambda d, i=index: d.find_element(By.ID, "replay-slider").get_attribute("value") == str(i))
        assert text(page, "#stat-step") == f"{observation.step_count} / {observation.max_steps}"
        assert text(page, "#message") == observation.message
        if index:
            step = record.trace[index - 1]
            assert step.action_text in text(page, "#agent-action")
            assert text(page, "#stat-reward") == signed(step.reward)
        for service in observation.visible_logs:
            assert page.find_elements(By.CSS_SELECTOR, f'#logs .block[data-service="{service}"]')
        if index == 3:
            screenshot(page, "replay-desktop")
            screenshot(page, "replay-phone", PHONE)
    assert not page.find_element(By.ID, "replay-next").is_enabled()
    assert text(page, "#score-value") == f"{record.score:.4f}"
    assert page.find_element(By.ID, "result").is_displayed()
    assert postmortem_shown(page) == postmortem_expected(msgspec.to_builtins(observations[-1].postmortem))
    screenshot(page, "replay-end-desktop")
    page.find_element(By.ID, "replay-prev").click()
    wait(page, lambda d: not d.find_element(By.ID, "result").is_displayed())
    assert postmortem_shown(page) == {} and not page.find_elements(By.CSS_SELECTOR, "#postmortem *")
    assert text(page, "#stat-step").startswith(f"{observations[-2].step_count} /")


@pytest.fixture
def file_server(tmp_path: Path) -> Iterator[str]:
    """Serves tmp_path on 127.0.0.1 with CORS, standing in for wherever a report keeps its results."""

    class Handler(http.server.SimpleHTTPRequestHandler):
        def end_headers(self) -> None:
            self.send_header("Access-Control-Allow-Origin", "*")
            super().end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(tmp_path)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"><i class="pwn">in</i>'


def test_html_in_a_log_line_is_shown_as_text(
    page: Any, make_server: Callable[..., str], file_server: str, tmp_path: Path
) -> None:
    # The core never writes HTML into a log, so the hostile line comes in through a replayed results
    # file: the replay renders with the same components as play. The page may fetch it from another
    # origin because the settings name that origin.
    server_url = make_server(allowed_origins=file_server)
    (record,) = results(server_url, ("easy",))
    data = msgspec.to_builtins(record)
    observation = data["trace"][0]["observation"]
    service = next(iter(observation["visible_logs"]))
    observation["visible_logs"][service] += f"\n2026-03-29T14:00:01.000Z {service}-0 app[1]: ERROR {HOSTILE}"
    observation["message"] = f"message {HOSTILE}"
    observation["alerts"][0]["summary"] = f"summary {HOSTILE}"
    data["trace"][0]["action"]["rationale"] = f"because {HOSTILE}"
    (tmp_path / "hostile.jsonl").write_bytes(msgspec.json.encode(data) + b"\n")

    open_page(page, f"{server_url}/web?replay={file_server}/hostile.jsonl&episode={record.name}")
    wait(page, lambda d: text(d, "#stat-incident") == f"{record.task} / {record.incident}")
    page.find_element(By.ID, "replay-next").click()
    wait(page, lambda d: HOSTILE in d.find_element(By.ID, "logs").get_attribute("textContent"))
    for css in ("#logs", "#message", "#alerts", "#agent-action"):
        assert HOSTILE in page.find_element(By.CSS_SELECTOR, css).get_attribute("textContent"), css
    assert page.execute_script("return document.querySelectorAll('main script, main img, .pwn').length") == 0
    assert page.execute_script("return window.__pwned") is None
    line = page.find_element(By.XPATH, f'//div[@data-service="{service}"]//span[contains(., "window.__pwned")]')
    assert line.find_element(By.CSS_SELECTOR, ".lvl").text == "ERROR"
    screenshot(page, "replay-html-as-text")


# --- sessions -----------------------------------------------------------------------------------


def expected_logs(task: str, incident: str, seed: int, service: str) -> str:
    env = ServiceIncidentEnvironment()
    env.reset(task_id=task, seed=seed, incident_id=incident)
    return env.step(InspectLogs(target=service)).visible_logs[service]


def test_two_tabs_play_two_incidents_at_once_and_leave_no_session_behind(
    page: Any, make_server: Callable[..., str]
) -> None:
    base = make_server()
    games = {"a": ("easy", "easy_002", 7), "b": ("medium", "med_003", 8)}
    tabs = {"a": page.current_window_handle}
    open_page(page, f"{base}/web/")
    assert active_sessions(base) == 0  # the page connects when an episode starts, not before
    start_episode(page, *games["a"])
    page.switch_to.new_window("tab")
    tabs["b"] = page.current_window_handle
    open_page(page, f"{base}/web/")
    start_episode(page, *games["b"])
    wait_sessions(base, 2)

    picked: dict[str, list[str]] = {}
    for round_ in range(2):
        for tab in ("a", "b"):
            page.switch_to.window(tabs[tab])
            services = service_names(page)
            service = services[-1 - round_]
            picked.setdefault(tab, []).append(service)
            click_service(page, service)
            take(page, "inspect_logs")
    for tab, (task, incident, seed) in games.items():
        page.switch_to.window(tabs[tab])
        assert text(page, "#stat-incident") == f"{task} / {incident}"
        assert text(page, "#stat-step").startswith("2 /")
        assert texts(page, "#timeline .what")[1:] == [f"inspect_logs({s})" for s in picked[tab]]
        first = picked[tab][0]
        shown = page.find_element(By.CSS_SELECTOR, f'#logs .block[data-service="{first}"] pre.log')
        assert shown.get_attribute("textContent").rstrip("\n") == expected_logs(task, incident, seed, first)

    # Reloading a tab closes its session; so does closing one.
    page.switch_to.window(tabs["b"])
    page.refresh()
    wait(page, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true")
    wait_sessions(base, 1)
    page.close()
    page.switch_to.window(tabs["a"])
    assert text(page, "#stat-incident") == "easy / easy_002"
    click_service(page, picked["a"][0])
    take(page, "inspect_metrics")  # tab a's session is untouched
    assert texts(page, "#metrics tbody th") == [picked["a"][0]]
    page.get("about:blank")
    wait_sessions(base, 0)


def test_metrics_keep_their_trend_across_steps(page: Any, server_url: str) -> None:
    """The server shows the latest reading only; the page keeps each service's history."""
    task, incident, seed = "medium_incident_triage", "medium_001", 3
    env = ServiceIncidentEnvironment()
    service = env.reset(task_id=task, seed=seed, incident_id=incident).topology[0].name
    readings = [env.step(InspectMetrics(target=service, rationale="look")).visible_metrics[service] for _ in range(3)]
    open_page(page, f"{server_url}/web/")
    start_episode(page, task, incident, seed)
    page.find_element(By.ID, "rationale").send_keys("look")
    click_service(page, service)
    for _ in range(3):
        take(page, "inspect_metrics")
    cell = page.find_element(By.CSS_SELECTOR, "#metrics tbody tr td.metric")
    assert cell.find_element(By.CSS_SELECTOR, ".value").text == f"{round(readings[-1].latency_ms)} ms"
    arrow = cell.find_element(By.CSS_SELECTOR, ".trend").text
    previous, last = readings[-2].latency_ms, readings[-1].latency_ms
    assert arrow == ("→" if abs(last - previous) <= max(abs(previous), 1) * 0.01 else "↑" if last > previous else "↓")
    assert cell.find_elements(By.CSS_SELECTOR, "svg.spark polyline")


def test_every_view_on_the_page_says_the_minute_it_was_taken(page: Any, server_url: str) -> None:
    """A view from an earlier step keeps its minute beside the new ones, so it never reads as current."""
    open_page(page, f"{server_url}/web/")
    frames_received(page)
    start_episode(page, "rca_01", "rca_01", 1)
    entry = "api-gateway"
    click_service(page, entry)
    take(page, "inspect_traces")
    take(page, "inspect_metrics")
    observations = [f["data"]["observation"] for f in frames_received(page) if f["type"] == "observation"]
    reset_minute, traces_minute, metrics_minute = (obs["clock"][11:16] for obs in observations[-3:])
    assert len({reset_minute, traces_minute, metrics_minute}) == 3
    shown = next(iter(observations[-3]["visible_logs"]))

    def stamp(css: str) -> str:
        return page.find_element(By.CSS_SELECTOR, css).get_attribute("textContent")

    assert stamp(f'#logs .block[data-service="{shown}"] .block-head .as-of') == f" · as of {reset_minute}"
    assert stamp(f'#traces .block[data-service="{entry}"] .block-head .as-of') == f" · as of {traces_minute}"
    assert stamp("#metrics tbody td.seen") == f"as of {metrics_minute}"
    assert "endpoint " in stamp(f'#traces .block[data-service="{entry}"] pre')  # the breakdown by endpoint


def test_a_full_server_is_said_so_and_a_freed_slot_is_usable(page: Any, make_server: Callable[..., str]) -> None:
    base = make_server(max_concurrent_envs=1)
    first = page.current_window_handle
    open_page(page, f"{base}/web/?task=easy&incident=easy_003&seed=1")
    page.find_element(By.ID, "start").click()
    wait(page, lambda d: text(d, "#stat-incident") == "easy / easy_003")
    page.switch_to.new_window("tab")
    open_page(page, f"{base}/web/?task=hard&incident=hard_001&seed=1")
    page.find_element(By.ID, "start").click()
    wait(page, lambda d: d.find_element(By.ID, "flash").is_displayed())
    assert text(page, "#flash").startswith("CAPACITY_REACHED: Server at capacity: 1/1")
    assert not page.find_element(By.ID, "episode").is_displayed()
    second = page.current_window_handle
    page.switch_to.window(first)
    page.get("about:blank")
    wait_sessions(base, 0)
    page.switch_to.window(second)
    page.find_element(By.ID, "start").click()
    wait(page, lambda d: text(d, "#stat-incident") == "hard / hard_001")
    assert not page.find_element(By.ID, "flash").is_displayed()


# --- a held-out episode -------------------------------------------------------------------------


@pytest.mark.parametrize("task_id", ["holdout_expert", "gen_expert"])
def test_a_held_out_episode_on_the_page_shows_no_seed_and_no_answer(
    page: Any, make_server: Callable[..., str], task_id: str
) -> None:
    from holdout_support import KEY, leaks

    base_url = make_server(holdout_key=KEY)
    open_page(page, f"{base_url}/web/?task={task_id}&seed=5")
    page.find_element(By.ID, "start").click()
    wait(page, lambda d: text(d, "#stat-incident").startswith(f"{task_id} / ") and text(d, "#stat-step")[0] == "0")
    first = service_names(page)[0]
    click_service(page, first)
    take(page, "inspect_logs")
    page.find_element(By.CSS_SELECTOR, f'#rc-list input[value="{first}"]').click()
    page.find_element(By.CSS_SELECTOR, '#severity input[value="P1"] + span').click()
    take(page, "declare")
    wait(page, lambda d: d.find_element(By.ID, "result").is_displayed())
    frames = frames_received(page)
    shown = [page.execute_script("return document.documentElement.outerHTML"), *(json.dumps(f) for f in frames)]
    final = [f["data"] for f in frames if f["type"] == "observation"][-1]["observation"]
    if task_id == "holdout_expert":
        assert leaks(shown) == []
        assert text(page, "#score-value")  # the score is shown, the postmortem is not
        assert final["postmortem"] is None and postmortem_shown(page) == {}
        assert not page.find_elements(By.CSS_SELECTOR, "#postmortem *")
        screenshot(page, "play-held-out-desktop")
    else:  # the open tier's postmortem names its faults: the check above would see a leak
        assert leaks(shown)
        assert postmortem_shown(page) == postmortem_expected(final["postmortem"])
        screenshot(page, "play-open-tier-end-desktop")
