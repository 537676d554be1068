"""A stand-in for the `docker` command where no Docker engine runs (this machine, CI): as much of
`version`, `run -d`, `stop` and `rm` as OpenEnv's `LocalDockerProvider` uses. `run` starts what the
image runs, our `server`, as a process of this machine listening on 127.0.0.1 at the host port the
provider maps; every call is logged to $DOCKER_CLI_LOG as a JSON line, beside one pid file per running
"container". Runs in the stock venv, where the package is installed beside `openenv`.
"""

import itertools
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

LOG = Path(os.environ["DOCKER_CLI_LOG"])
STOP_WAIT_S = 10.0


def run(args: list[str]) -> int:
    published = args[args.index("-p") + 1]
    host_port, container_port = published.split(":")
    if container_port != "8000":  # the port the Dockerfile's server listens on
        print(f"the image serves port 8000, not {container_port}", file=sys.stderr)
        return 125
    variables = dict(value.split("=", 1) for flag, value in itertools.pairwise(args) if flag == "-e")
    server = subprocess.Popen(
        [sys.executable, "-m", "service_incident.server", "--host", "127.0.0.1", "--port", host_port],
        env={**os.environ, **variables},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    container = uuid.uuid4().hex
    LOG.with_name(f"{container}.pid").write_text(str(server.pid))
    print(container)
    return 0


def stop(container: str) -> int:
    pid_file = LOG.with_name(f"{container}.pid")
    pid = int(pid_file.read_text())
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT_S
    while time.monotonic() < deadline:
        if not running(pid):
            pid_file.unlink()
            return 0
        time.sleep(0.05)
    return 1


def running(pid: int) -> bool:
    # The server outlived the `run` that started it, so whoever reaps orphans reaps it: until then it
    # lingers as a zombie, which has stopped all the same.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def main(args: list[str]) -> int:
    with LOG.open("a") as log:
        log.write(json.dumps(args) + "\n")
    if args[0] == "version":
        return 0
    if args[0] == "run":
        return run(args[1:])
    if args[0] == "stop":
        return stop(args[1])
    if args[0] == "rm":
        return 0
    print(f"docker {args[0]}: not played here", file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
