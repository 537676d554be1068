"""Evaluate an agent on Service Incident: `python inference.py --help` says how.

The body is `service_incident.harness.cli`; this file keeps the command OpenEnv expects at the root.
"""

from service_incident.harness.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
