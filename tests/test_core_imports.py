"""The core does no I/O: importing it (and the pure report beside it) loads no network, server,
async or model-client library. Checked in a fresh interpreter, whose modules nothing else has loaded."""

from __future__ import annotations

import json
import subprocess
import sys

PURE = (
    "service_incident.environment",
    "service_incident.models",
    "service_incident.tasks",
    "service_incident.scoring",
    "service_incident.harness.records",
    "service_incident.harness.report",
)
FORBIDDEN = ("socket", "websockets", "anyio", "uvicorn", "openai")


def loaded_after_importing(modules: tuple[str, ...], then: str = "") -> list[str]:
    code = (
        "import importlib, json, sys\n"
        f"for name in {list(modules)!r}: importlib.import_module(name)\n"
        f"{then}\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    return json.loads(result.stdout)


def test_the_core_and_the_report_load_no_io_library() -> None:
    loaded = loaded_after_importing(PURE)
    assert set(PURE) <= set(loaded)
    offending = [name for name in loaded if name.split(".")[0] in FORBIDDEN]
    assert offending == []


def test_the_check_sees_an_io_library_when_one_is_loaded() -> None:
    loaded = loaded_after_importing(("service_incident.client",))
    assert "websockets" in {name.split(".")[0] for name in loaded}


IN_PROCESS_EVALUATION = """
import asyncio
from service_incident.harness.evaluation import evaluate, reference_policy
from service_incident.harness.records import plan
from service_incident.harness.session import InProcess
from service_incident.tasks import TASKS
records = asyncio.run(evaluate(reference_policy("expert"), plan([TASKS["easy"]]), sessions=InProcess()))
assert records and all(record.failure is None for record in records), records
"""


def test_an_in_process_evaluation_loads_neither_the_client_nor_websockets_nor_anyio() -> None:
    loaded = loaded_after_importing((), then=IN_PROCESS_EVALUATION)
    assert "service_incident.harness.evaluation" in loaded
    assert [name for name in loaded if name.split(".")[0] in ("websockets", "anyio") or ".client" in name] == []


def test_the_evaluation_command_needs_openai_only_for_the_llm_agent() -> None:
    # An image without the model client still evaluates the reference agents.
    loaded = loaded_after_importing(("service_incident.harness.cli",))
    assert "openai" not in {name.split(".")[0] for name in loaded}


def test_the_client_loads_the_wire_without_the_server() -> None:
    loaded = loaded_after_importing(("service_incident.client",))
    assert "service_incident.wire" in loaded
    assert [name for name in loaded if name.startswith("service_incident.server")] == []
