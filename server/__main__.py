"""`python -m service_incident.server`: the `server` command."""

from .app import main

main()
