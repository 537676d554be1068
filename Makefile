# Each target sets up the virtual environment it needs, so both work on a fresh machine.
VENV ?= .venv
PY := $(VENV)/bin/python

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

.PHONY: run test lint
run: $(VENV)/.installed
	$(PY) inference.py

lint: $(VENV)/.installed
	$(PY) -m ruff check .

test: lint
	$(PY) -m pytest -q
