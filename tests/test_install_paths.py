"""Every way the project is installed and started works, from a fresh copy of the repository.

`pip install .` and `pip install -e .` each into a new venv; then `python inference.py` and
`python data.py validate` from the repository and from a folder with nothing of it, the console
scripts, `python -m service_incident.server` and `uvicorn server.app:app` (openenv.yaml's `app`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from inference_support import parse_transcript
from install_support import free_port, fresh_copy, get_json, new_venv, run, serving

from service_incident.tasks import TASKS

pytestmark = pytest.mark.slow

# What setuptools says when its configuration leaves something out or relies on deprecated
# behaviour. Editable installs of a flat layout (the top-level service_incident/ folder) always add
# one informational note (`BuildBackendWarning: Editable installation.`): it is not one of these.
SETUPTOOLS_WARNINGS = re.compile(
    r"SetuptoolsDeprecationWarning|SetuptoolsWarning|_Warning|would be ignored|"
    r"absent from the `packages` configuration|is deprecated"
)

CHECK_IMPORTS = (
    "import importlib.resources, service_incident.server.app, service_incident.client, service_incident.harness;"
    "print(service_incident.server.app.__file__, service_incident.client.__file__, service_incident.harness.__file__,"
    " importlib.resources.files('service_incident').joinpath('openenv.yaml').read_text() == {manifest!r})"
)


@dataclass(frozen=True)
class Install:
    bin: Path
    log: str

    @property
    def python(self) -> Path:
        return self.bin / "python"


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fresh_copy(tmp_path_factory.mktemp("checkout"))


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("elsewhere")


def install(checkout: Path, venv: Path, *options: str) -> Install:
    bin_folder = new_venv(venv)
    # -v: pip hides what the build backend prints otherwise, its warnings included.
    result = run([bin_folder / "python", "-m", "pip", "install", "-v", *options, checkout], cwd=venv.parent)
    return Install(bin_folder, result.stdout + result.stderr)


@pytest.fixture(scope="module")
def wheel(checkout: Path, tmp_path_factory: pytest.TempPathFactory) -> Install:
    return install(checkout, tmp_path_factory.mktemp("wheel") / "venv")


@pytest.fixture(scope="module")
def editable(checkout: Path, tmp_path_factory: pytest.TempPathFactory) -> Install:
    return install(checkout, tmp_path_factory.mktemp("editable") / "venv", "-e")


def imported_files(python: Path, checkout: Path, cwd: Path) -> list[str]:
    manifest = (checkout / "openenv.yaml").read_text()
    out = run([python, "-c", CHECK_IMPORTS.format(manifest=manifest)], cwd=cwd).stdout.split()
    assert out[-1] == "True", "the package holds no openenv.yaml equal to the repository's"
    return out[:-1]


def test_installing_prints_no_setuptools_warning(wheel: Install, editable: Install) -> None:
    for log in (wheel.log, editable.log):
        assert "Successfully installed" in log
        assert not SETUPTOOLS_WARNINGS.findall(log), [
            line for line in log.splitlines() if SETUPTOOLS_WARNINGS.search(line)
        ]


def test_the_installed_package_is_whole(wheel: Install, checkout: Path, elsewhere: Path) -> None:
    site = str(wheel.bin.parent)
    assert all(path.startswith(site) for path in imported_files(wheel.python, checkout, elsewhere))


KERNELS = (
    "from service_incident.telemetry import templates, traces; from service_incident.world import decimals, draws,"
    " simulation; print(*(module.compiled_kernel() is not None for module in (templates, traces, simulation, draws,"
    " decimals)))"
)


def test_the_installed_package_has_its_compiled_kernels(wheel: Install, elsewhere: Path) -> None:
    assert run([wheel.python, "-c", KERNELS], cwd=elsewhere).stdout.split() == ["True"] * 5


# Which of the hot modules (service_incident.compiled) an install runs compiled, and what it warned.
HOT_MODULES = (
    "import importlib, importlib.machinery as m; from service_incident import compiled\n"
    "print(sum(importlib.import_module(n).__file__.endswith(tuple(m.EXTENSION_SUFFIXES)) for n in compiled.MODULES),"
    " len(compiled.MODULES))"
)


def test_the_installed_package_runs_its_hot_modules_compiled(wheel: Install, elsewhere: Path) -> None:
    """The wheel carries the build's record of the sources it compiled, so none runs its source."""
    found = run([wheel.python, "-W", "error", "-c", HOT_MODULES], cwd=elsewhere).stdout.split()
    assert found[0] == found[1] != "0"


# An episode of a generated task played to its end by the expert: its score.
PLAY = (
    "from service_incident.environment import ServiceIncidentEnvironment as E;"
    "from service_incident.harness.agents import ExpertAgent as A\n"
    "env, agent = E(), A(); obs = env.reset(task_id='gen_hard', seed=5)\n"
    "while not obs.done: obs = env.step(agent.act(obs))\n"
    "print(obs.score)"
)


@pytest.mark.parametrize("compiler", ["/nonexistent/cc", "false"])
def test_without_a_working_c_compiler_the_package_installs_and_computes_in_python(
    elsewhere: Path, tmp_path: Path, compiler: str
) -> None:
    """A compiler that is not there, or that fails: the kernels are left out, said so, and the Python
    they stand for plays the episodes."""
    # A copy of its own: pip builds in the tree, and the kernels another install built there are kept.
    copy = fresh_copy(tmp_path / "checkout")
    bin_folder = new_venv(tmp_path / "venv")
    command = ["env", f"CC={compiler}", bin_folder / "python", "-m", "pip", "install", "-v", copy]
    result = run(command, cwd=tmp_path)
    said = result.stderr + result.stdout
    assert all(f"{kernel} not compiled" in said for kernel in ("_keyed", "_spans", "_minute", "_noise", "_decimals"))
    assert run([bin_folder / "python", "-c", KERNELS], cwd=elsewhere).stdout.split() == ["False"] * 5
    assert run([bin_folder / "python", "-W", "error", "-c", HOT_MODULES], cwd=elsewhere).stdout.split()[0] == "0"
    played = run([bin_folder / "python", "-c", PLAY], cwd=elsewhere)
    assert 0.0 <= float(played.stdout) <= 1.0


def test_an_editable_install_runs_the_checkout(editable: Install, checkout: Path, elsewhere: Path) -> None:
    assert all(path.startswith(str(checkout)) for path in imported_files(editable.python, checkout, elsewhere))
    probe = checkout / "service_incident" / "probe_edit.py"
    probe.write_text("EDITED = 42\n")
    try:  # a change in the checkout is what runs, without reinstalling
        result = run(
            [editable.python, "-c", "from service_incident.probe_edit import EDITED; print(EDITED)"], cwd=elsewhere
        )
        assert result.stdout.strip() == "42"
    finally:
        probe.unlink()
    assert (
        "service-incident-dataset" in run([editable.bin / "service-incident-dataset", "--help"], cwd=elsewhere).stdout
    )


@pytest.mark.parametrize("where", ["root", "elsewhere"])
def test_inference_runs_on_its_defaults(wheel: Install, checkout: Path, elsewhere: Path, where: str) -> None:
    """From the repository, its own service_incident/ folder comes first on the path, not the installed one."""
    cwd = checkout if where == "root" else elsewhere
    result = run([wheel.python, checkout / "inference.py"], cwd=cwd)
    played = sorted(episode.task for episode in parse_transcript(result.stdout))
    assert played == sorted(f"{task.id}/{incident}" for task in TASKS.values() for incident in task.incidents)
    assert (cwd / "results" / "episodes.jsonl").is_file() and (cwd / "results" / "report.md").is_file()


@pytest.mark.parametrize("where", ["root", "elsewhere"])
def test_the_dataset_validates(wheel: Install, checkout: Path, elsewhere: Path, where: str) -> None:
    cwd = checkout if where == "root" else elsewhere
    result = run([wheel.python, checkout / "data.py", "validate", "--seeds", "20"], cwd=cwd)
    assert "identical to a fresh build" in result.stdout
    assert "| expert | 20 |" in result.stdout


def test_the_evaluation_command_is_installed(wheel: Install, elsewhere: Path) -> None:
    result = run(
        [wheel.bin / "service-incident-evaluate", "--tasks", "easy,gen_hard", "--episodes", "2"], cwd=elsewhere
    )
    played = sorted(episode.task for episode in parse_transcript(result.stdout))
    assert played == sorted(
        f"{task}/{incident}" for task in ("easy", "gen_hard") for incident in TASKS[task].incidents[:2]
    )


def test_the_dataset_command_is_installed(wheel: Install, elsewhere: Path) -> None:
    assert (
        "identical to a fresh build"
        in run([wheel.bin / "service-incident-dataset", "validate", "--seeds", "5"], cwd=elsewhere).stdout
    )
    exported = run([wheel.bin / "service-incident-dataset", "export", elsewhere / "export"], cwd=elsewhere)
    assert "exported" in exported.stdout and (elsewhere / "export" / "generated_eval.jsonl").stat().st_size > 0


@pytest.mark.parametrize("how", ["server", "python -m service_incident.server", "uvicorn server.app:app"])
def test_the_server_starts(wheel: Install, checkout: Path, elsewhere: Path, how: str) -> None:
    port = free_port()
    commands = {
        "server": ([wheel.bin / "server", "--port", port], elsewhere),
        "python -m service_incident.server": (
            [wheel.python, "-m", "service_incident.server", "--port", port],
            elsewhere,
        ),
        # OpenEnv's way: openenv.yaml's `app`, from the repository root.
        "uvicorn server.app:app": ([wheel.bin / "uvicorn", "server.app:app", "--port", port], checkout),
    }
    command, cwd = commands[how]
    with serving([str(part) for part in command], cwd=cwd, port=port) as url:
        assert get_json(f"{url}/health")["status"] == "healthy"
        assert [task["id"] for task in get_json(f"{url}/tasks")] == list(TASKS)
