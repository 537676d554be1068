"""The generated incident dataset: `python data.py build | validate | export DIR` (see --help).

The same command is installed as `service-incident-dataset`.
"""

from service_incident.harness.dataset_cli import main

if __name__ == "__main__":
    raise SystemExit(main())
