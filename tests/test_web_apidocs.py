"""`/docs`: the interactive page of the HTTP API (Swagger UI over /openapi.json), in a real browser
(Debian's Chromium, as tests/test_web_page.py drives it): it renders every route of the document,
runs a request against our server, and loads nothing from anywhere else, under the CSP of /web."""

from __future__ import annotations

import json
from typing import Any

import httpx
from starlette.routing import Route

# Importing test_web_page skips this module where selenium is missing, as it skips itself.
from test_web_page import By, page, screenshot, wait  # noqa: F401 (a fixture)

from service_incident.server.app import create_app
from service_incident.server.openapi import openapi_document

# What the document does not describe: pages for people, and the document itself.
ANY_METHOD = {"GET", "POST", "PUT", "PATCH", "DELETE"}
NOT_API = {"/", "/web", "/web/", "/web/{name}", "/docs", "/docs/{name}", "/openapi.json"}


def operations(driver: Any) -> dict[str, str]:
    """The operations the page rendered: path -> method."""
    blocks = driver.find_elements(By.CSS_SELECTOR, ".opblock")
    return {
        block.find_element(By.CSS_SELECTOR, ".opblock-summary-path").get_attribute("data-path"): block.find_element(
            By.CSS_SELECTOR, ".opblock-summary-method"
        ).text.lower()
        for block in blocks
    }


def requested_urls(driver: Any) -> list[str]:
    events = [json.loads(entry["message"])["message"] for entry in driver.get_log("performance")]
    return [event["params"]["request"]["url"] for event in events if event["method"] == "Network.requestWillBeSent"]


def test_the_document_describes_every_http_route_of_the_app() -> None:
    app = create_app()
    # A route without methods (the ASGI app at /mcp) takes any.
    served = {route.path: (route.methods or ANY_METHOD) - {"HEAD"} for route in app.routes if isinstance(route, Route)}
    described = {path: {method.upper() for method in methods} for path, methods in openapi_document()["paths"].items()}
    api = {path: methods for path, methods in served.items() if path not in NOT_API}
    assert described.keys() == api.keys()
    for path, methods in described.items():
        assert methods <= api[path], path


def test_docs_renders_every_route_and_runs_a_request(page: Any, server_url: str) -> None:  # noqa: F811
    document = httpx.get(f"{server_url}/openapi.json").json()
    page.get(f"{server_url}/docs")
    wait(page, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".opblock")) == len(document["paths"]))
    assert operations(page) == {path: next(iter(methods)) for path, methods in document["paths"].items()}
    assert page.find_element(By.CSS_SELECTOR, ".info .title").text.startswith(document["info"]["title"])

    health = next(
        block
        for block in page.find_elements(By.CSS_SELECTOR, ".opblock")
        if block.find_element(By.CSS_SELECTOR, ".opblock-summary-path").get_attribute("data-path") == "/health"
    )
    health.find_element(By.CSS_SELECTOR, ".opblock-summary").click()
    wait(page, lambda d: health.find_elements(By.CSS_SELECTOR, ".try-out__btn"))
    health.find_element(By.CSS_SELECTOR, ".try-out__btn").click()
    wait(page, lambda d: health.find_elements(By.CSS_SELECTOR, ".execute"))
    health.find_element(By.CSS_SELECTOR, ".execute").click()
    status = wait(
        page, lambda d: health.find_elements(By.CSS_SELECTOR, ".live-responses-table tbody .response-col_status")
    )
    assert status[0].text.strip() == "200"
    body = health.find_element(By.CSS_SELECTOR, ".live-responses-table tbody .response-col_description pre").text
    assert json.loads(body)["status"] == "healthy"

    urls = requested_urls(page)
    assert f"{server_url}/docs/swagger-ui-bundle.js" in urls and f"{server_url}/openapi.json" in urls
    fetched = [url for url in urls if url.startswith(("http:", "https:", "ws:", "wss:"))]
    assert [url for url in fetched if not url.startswith(server_url)] == []
    screenshot(page, "docs")


def test_docs_is_served_under_the_policy_of_web(server_url: str) -> None:
    with httpx.Client(base_url=server_url) as http:
        web = http.get("/web/")
        docs = [http.get(path) for path in ("/docs", "/docs/swagger-ui-bundle.js", "/docs/swagger-ui.css")]
        missing = http.get("/docs/index.html")
    for response in docs:
        assert response.status_code == 200
        assert response.headers["content-security-policy"] == web.headers["content-security-policy"]
        assert response.headers["x-content-type-options"] == "nosniff"
    assert missing.status_code == 404
