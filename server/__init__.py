"""The OpenEnv-compatible server: WebSocket sessions on `/ws` plus OpenEnv's HTTP routes.

`service_incident.server.app` holds the app (`app`, `create_app`) and the `server` script (`main`).
"""
