"""python -m service_incident.harness.fitted build [--seeds N] | check

- build: fit the fitted agent's model on training seeds and write it into the package (needs the
  `bench` extra, for scikit-learn).
- check: whether the checked-in model was fitted on the world as it is now (exit 1 if not).
"""

from __future__ import annotations

import argparse
import sys

from .model import load, save
from .world import fingerprint


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m service_incident.harness.fitted", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="fit the model on training seeds and write it")
    build.add_argument("--seeds", type=int, default=None, help="training seeds per tier")
    commands.add_parser("check", help="whether the model matches the world")
    args = parser.parse_args(argv)
    if args.command == "build":
        from .build import SEEDS
        from .build import build as fit

        path = save(fit(args.seeds or SEEDS))
        print(f"wrote {path}")
        return 0
    recorded, now = load().world, fingerprint()
    if recorded != now:
        print(f"the model was fitted on world {recorded[:12]}, the world is {now[:12]}: rebuild it", file=sys.stderr)
        return 1
    print(f"the model matches world {now[:12]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
