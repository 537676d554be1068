"""`python -m service_incident.server`: the `server` script."""

from .app import main

main()
