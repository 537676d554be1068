# Service Incident as an OpenEnv environment server (Hugging Face Space: sdk docker, app_port 8000).
# Not built by the tests or CI, which have no Docker engine; tests/test_install_paths.py runs the
# same steps (a wheel of a fresh copy installed into a new environment, then `server`) without one.

# First stage: the package as a wheel, from what `pip install .` reads (pyproject.toml, setup.py for
# the compiled kernels, README.md as the long description, and the three folders the package is made
# of). The kernels need a C compiler to build, here only: the image runs the wheel without one.
FROM python:3.11-slim AS wheel
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY service_incident ./service_incident
COPY server ./server
COPY client ./client
RUN pip wheel --no-deps --wheel-dir /wheels .

# The image: the installed wheel and its dependencies, run by an unprivileged user, no checkout. With
# the `mcp` extra, /mcp also serves MCP clients' sessions through the official SDK.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=wheel /wheels /wheels
RUN pip install "$(echo /wheels/*.whl)[mcp]" \
    && rm -rf /wheels \
    && useradd --create-home --uid 1000 app

# Spaces run containers as uid 1000.
USER app
WORKDIR /home/app
# All interfaces inside the container; the server's own default is loopback only.
ENV HOST=0.0.0.0 \
    PORT=8000
EXPOSE 8000

# The slim image has no curl: ask /health with the interpreter that is there anyway.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request as u; u.urlopen('http://127.0.0.1:8000/health', timeout=4)"]

# The server always serves its page at /web (the Space front matter's base_path); it does not read
# ENABLE_WEB_INTERFACE, and naming it here keeps `openenv push` from injecting it.
CMD ["server"]
