"""Helpers for the install tests: a fresh copy of the repository, virtual environments, commands served."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from inference_support import CONFIG_VARIABLES

ROOT = Path(__file__).resolve().parent.parent
# Loopback traffic must not go through a proxy configured in the environment.
_direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def fresh_copy(destination: Path) -> Path:
    """The files a clone of the working tree would have: tracked ones and new ones not ignored."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return destination


def environment() -> dict[str, str]:
    """This process's environment without what would steer the commands under test elsewhere."""
    # MAKELEVEL and MAKEFLAGS would make a `make` run by a test (under `make test`) a sub-make, which
    # prints "Entering directory" on stdout.
    steering = {
        *CONFIG_VARIABLES,
        "PYTHONPATH",
        "VIRTUAL_ENV",
        "OPENENV_PYTHON",
        "VENV",
        "PYTHON",
        "MAKELEVEL",
        "MAKEFLAGS",
        "MFLAGS",
    }
    return {k: v for k, v in os.environ.items() if k not in steering}


def run(command: Sequence[str | Path], *, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run to completion; fail with the command's output when it does not exit 0."""
    result = subprocess.run(
        [str(c) for c in command],
        cwd=cwd,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, f"{command} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


def new_venv(path: Path) -> Path:
    """A virtual environment of the interpreter running the tests; returns its bin folder."""
    run([sys.executable, "-m", "venv", path], cwd=path.parent)
    return path / "bin"


def free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        return listener.getsockname()[1]


def get_json(url: str) -> object:
    with _direct.open(url, timeout=5) as response:
        return json.loads(response.read())


@contextmanager
def serving(command: Sequence[str | Path], *, cwd: Path, port: int, timeout_s: float = 30) -> Iterator[str]:
    """Start a server command, wait until it answers /health; yields its base URL; stops it after."""
    url = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [str(c) for c in command],
        cwd=cwd,
        env=environment(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            assert process.poll() is None, f"{command} exited {process.returncode}\n{process.communicate()[0]}"
            assert time.monotonic() < deadline, f"{command} did not answer /health within {timeout_s} s"
            try:
                get_json(f"{url}/health")
                break
            except (urllib.error.URLError, OSError):
                time.sleep(0.05)  # not serving yet
        yield url
    finally:
        process.terminate()
        process.communicate(timeout=10)
