# Each target sets up the virtual environment it needs, so both work on a fresh machine.
VENV ?= .venv
PY := $(VENV)/bin/python

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

# The stock OpenEnv package for the interop tests lives in its own venv: it pulls in gradio, fastapi
# and ~80 more packages that our runtime must not come to depend on by accident.
# tests/conftest.py looks for it there (or wherever OPENENV_PYTHON points).
OPENENV_VENV := .venvs/openenv

$(OPENENV_VENV)/.installed: pyproject.toml
	python3 -m venv $(OPENENV_VENV)
	$(OPENENV_VENV)/bin/python -m pip install -q --upgrade pip
	$(OPENENV_VENV)/bin/python -m pip install -q -e '.[interop]'
	touch $@

.PHONY: run test lint
# Silent recipe: inference.py's stdout is a contract of [START]/[STEP]/[END] lines only.
run: $(VENV)/.installed
	@$(PY) inference.py

lint: $(VENV)/.installed
	$(PY) -m ruff check .

test: lint $(OPENENV_VENV)/.installed
	$(PY) -m pytest -q
