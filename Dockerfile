# Service Incident as an OpenEnv environment server (Hugging Face Space: sdk docker, app_port 8000).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY service_incident ./service_incident
COPY server ./server
COPY client ./client
RUN pip install . \
    && useradd --create-home --uid 1000 app

# Spaces run containers as uid 1000.
USER app
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
