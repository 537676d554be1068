"""The web page at `/web`: a person plays an incident, or replays an agent's run, in a browser.

The page (server/web/: hand-written HTML, JavaScript and CSS, no build step, nothing fetched from
elsewhere) is a client of `/ws` like any other, so each tab is its own session. The files are read
once and served from memory; `/` and `/web` redirect to `/web/`, keeping the query string
(`/web?replay=<url>` opens a results file), so the page's relative links work behind any prefix.
"""

from __future__ import annotations

import hashlib
from pathlib import Path, PurePosixPath

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

WEB_DIR = Path(__file__).with_name("web")
INDEX = "index.html"
MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}


def page_policy(frame_ancestors: str = "'none'", connect_origins: frozenset[str] = frozenset()) -> str:
    """The page's Content-Security-Policy. Scripts and styles from this server only: even if a log
    line's HTML reached the DOM, no script in it could run, and it could send nothing anywhere but
    this server (`'self'` covers its WebSocket too) and the origins ALLOWED_ORIGINS names, which
    replays may be fetched from (they must allow it with CORS). Framed only by `frame_ancestors`."""
    others = ["ws:", "wss:", "http:", "https:"] if "*" in connect_origins else sorted(connect_origins)
    connect = " ".join(["'self'", *others])
    return (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        f"connect-src {connect}; object-src 'none'; base-uri 'none'; form-action 'none'; "
        f"frame-ancestors {frame_ancestors}"
    )


# Result files are data, never a document: nothing in one may run, load or be framed.
RESULTS_POLICY = "default-src 'none'; sandbox; frame-ancestors 'none'"
RESULT_TYPES = {".jsonl": "application/x-ndjson", ".md": "text/markdown; charset=utf-8"}


class _Asset:
    def __init__(self, body: bytes, media_type: str) -> None:
        self.body = body
        self.media_type = media_type
        self.etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


class WebUI:
    def __init__(self, directory: Path = WEB_DIR, policy: str = page_policy()) -> None:
        self.policy = policy
        self.assets = {
            path.name: _Asset(path.read_bytes(), MEDIA_TYPES[path.suffix])
            for path in sorted(directory.iterdir())
            if path.suffix in MEDIA_TYPES
        }
        if INDEX not in self.assets:
            raise FileNotFoundError(f"{directory / INDEX} is missing")

    def routes(self) -> list[Route]:
        return [
            Route("/", self.redirect, methods=["GET", "HEAD"]),
            Route("/web", self.redirect, methods=["GET", "HEAD"]),
            Route("/web/", self.page, methods=["GET", "HEAD"]),
            Route("/web/{name}", self.asset, methods=["GET", "HEAD"]),
        ]

    async def redirect(self, request: Request) -> Response:
        # Relative, so it also lands right when a proxy serves the app under a path prefix.
        query = request.url.query
        return RedirectResponse("web/" + (f"?{query}" if query else ""), status_code=307)

    async def page(self, request: Request) -> Response:
        return self._serve(request, self.assets[INDEX])

    async def asset(self, request: Request) -> Response:
        asset = self.assets.get(request.path_params["name"])
        if asset is None:
            return Response("Not Found", 404, media_type="text/plain")
        return self._serve(request, asset)

    def _serve(self, request: Request, asset: _Asset) -> Response:
        headers = {
            "ETag": asset.etag,
            # Revalidate every time: a new release shows at once, an unchanged file costs a 304.
            "Cache-Control": "no-cache",
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": self.policy,
            "Referrer-Policy": "no-referrer",
        }
        if request.headers.get("if-none-match") == asset.etag:
            return Response(status_code=304, headers=headers)
        return Response(asset.body, headers=headers, media_type=asset.media_type)


class ResultFiles(StaticFiles):
    """`/results/`: inference.py's result files (JSONL and Markdown) for the page to replay, and
    nothing else from the folder: no other type, no dotfile, no listing."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        name = PurePosixPath(path)
        media_type = RESULT_TYPES.get(name.suffix)
        if media_type is None or any(part.startswith(".") for part in name.parts):
            raise HTTPException(404, "not a result file")
        response = await super().get_response(path, scope)
        response.headers.update(
            {
                "Content-Type": media_type,
                "X-Content-Type-Options": "nosniff",
                "Content-Security-Policy": RESULTS_POLICY,
            }
        )
        return response
