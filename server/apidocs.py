"""`/docs`: the HTTP API as an interactive page (Swagger UI) over `/openapi.json`, as FastAPI servers have.

Swagger UI's files come from the `swagger-ui-bundle-v2` package and are served by this server, so
nothing is fetched from elsewhere; the page sits under the Content-Security-Policy of `/web`, which
runs no inline script, so the few lines that start Swagger UI are a file of their own.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from swagger_ui_bundle import swagger_ui_path

from .webui import MEDIA_TYPES, page_policy

# The two files of Swagger UI the page loads (the bundle carries its standalone preset).
BUNDLE = ("swagger-ui.css", "swagger-ui-bundle.js")

# Relative links: the page is /docs, so they land in /docs/ and the document is /openapi.json, also
# behind a proxy's path prefix.
PAGE = b"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Service Incident - HTTP API</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="docs/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="docs/swagger-ui-bundle.js"></script>
<script src="docs/start.js"></script>
</body>
</html>
"""

START = b"""window.ui = SwaggerUIBundle({
  url: new URL("openapi.json", document.baseURI).href,
  dom_id: "#swagger-ui",
  deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
  layout: "BaseLayout",
});
"""

# Swagger UI's files change only with the package's version, which names the folder they come from.
_BUNDLE_CACHE = "public, max-age=86400"


@cache
def _files(directory: Path = Path(str(swagger_ui_path))) -> dict[str, bytes]:
    """Read once per process: 1.7 MB the server keeps in memory from its first `/docs` on."""
    return {name: (directory / name).read_bytes() for name in BUNDLE} | {"start.js": START}


def routes(policy: str = page_policy()) -> list[Route]:
    """The page and its files, under `policy`: the Content-Security-Policy the server gives `/web`."""
    headers = {"X-Content-Type-Options": "nosniff", "Content-Security-Policy": policy, "Referrer-Policy": "no-referrer"}

    async def page(request: Request) -> Response:
        return Response(PAGE, media_type=MEDIA_TYPES[".html"], headers={**headers, "Cache-Control": "no-cache"})

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        body = _files().get(name)
        if body is None:
            return Response("Not Found", 404, media_type="text/plain")
        cache_control = _BUNDLE_CACHE if name in BUNDLE else "no-cache"
        return Response(
            body, media_type=MEDIA_TYPES[Path(name).suffix], headers={**headers, "Cache-Control": cache_control}
        )

    return [Route("/docs", page, methods=["GET", "HEAD"]), Route("/docs/{name}", asset, methods=["GET", "HEAD"])]
