"""The web page's routes and assets over real sockets; the page itself is tested in a browser (test_web_page.py)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.harness import report
from service_incident.harness.evaluation import EpisodeRecord, decode, encode
from service_incident.server.webui import WEB_DIR

ASSETS = {"index.html": "text/html", "app.js": "text/javascript", "style.css": "text/css"}


@pytest.fixture
def http(server_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server_url, timeout=5) as client:
        yield client


def test_root_and_web_redirect_to_the_page_keeping_the_query(http: httpx.Client) -> None:
    query = "?replay=r%2Fepisodes.jsonl&episode=easy%2Feasy_001"
    for path, location in (("/", "web/"), ("/web", "web/"), (f"/web{query}", f"web/{query}")):
        response = http.get(path)
        assert response.status_code == 307, path
        assert response.headers["location"] == location
    page = http.get("/", follow_redirects=True)
    assert page.status_code == 200 and str(page.url).endswith("/web/")
    assert "<title>Service Incident" in page.text


@pytest.mark.parametrize(("name", "media_type"), ASSETS.items())
def test_assets_are_served_with_their_type_and_revalidated(http: httpx.Client, name: str, media_type: str) -> None:
    path = "/web/" if name == "index.html" else f"/web/{name}"
    response = http.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith(media_type)
    assert response.content == (WEB_DIR / name).read_bytes()
    assert response.headers["cache-control"] == "no-cache"
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy  # no clickjacking frame
    again = http.get(path, headers={"If-None-Match": response.headers["etag"]})
    assert again.status_code == 304 and again.content == b""


def test_unknown_assets_are_404(http: httpx.Client) -> None:
    for path in ("/web/nope.js", "/web/..%2Fapp.py", "/web/webui.py"):
        assert http.get(path).status_code == 404, path


def test_the_page_loads_nothing_from_elsewhere() -> None:
    # The SVG namespace is a name, never fetched.
    allowed = {"http://www.w3.org/2000/svg"}
    for name in ASSETS:
        text = (WEB_DIR / name).read_text()
        urls = set(re.findall(r"(?:https?:)?//[\w.-]+\.[a-z]{2,}[^\s'\"`)]*", text)) - allowed
        assert not urls, f"{name} refers to {urls}"
        assert "@import" not in text and "url(" not in text.replace("url(#arrow)", "")


def test_the_script_never_writes_html() -> None:
    script = (WEB_DIR / "app.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in script, sink


def test_results_folder_is_served_for_replay_by_url(make_server: Callable[..., str], tmp_path: Path) -> None:
    env = ServiceIncidentEnvironment()
    record = EpisodeRecord(
        name="easy/easy_001",
        task="easy",
        incident="easy_001",
        seed=1,
        agent="expert",
        score=0.42,
        reset=env.reset(task_id="easy", seed=1, incident_id="easy_001"),
    )
    (tmp_path / "episodes.jsonl").write_bytes(encode(record))
    base = make_server(results_dir=str(tmp_path))
    served = httpx.get(f"{base}/results/episodes.jsonl")
    assert served.status_code == 200 and decode(served.content)[0].name == record.name
    assert httpx.get(f"{base}/results/../pyproject.toml").status_code == 404
    link = next(line for line in report.replay_section([record]) if "easy_001" in line)
    query = parse_qs(urlsplit(link.split("](", 1)[1].rstrip(")").split("):")[0]).query)
    assert query == {"replay": ["/results/episodes.jsonl"], "episode": ["easy/easy_001"]}
    assert httpx.get(f"{base}/web/").status_code == 200


def test_results_are_not_served_unless_asked(http: httpx.Client) -> None:
    assert http.get("/results/episodes.jsonl").status_code == 404
