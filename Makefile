# Each target sets up the virtual environment it needs, so both work on a fresh machine.
VENV ?= .venv
PY := $(VENV)/bin/python

# Setting up says nothing on stdout: `make run`'s stdout carries only inference.py's contract lines.
$(VENV)/.installed: pyproject.toml
	@echo "setting up $(VENV)" >&2
	@python3 -m venv $(VENV)
	@$(PY) -m pip install -q --upgrade pip >&2
	@$(PY) -m pip install -q -e '.[test]' >&2
	@touch $@

# The stock OpenEnv package for the interop tests lives in its own venv: it pulls in gradio, fastapi
# and ~80 more packages that our runtime must not come to depend on by accident.
# tests/conftest.py looks for it there (or wherever OPENENV_PYTHON points).
OPENENV_VENV := .venvs/openenv

$(OPENENV_VENV)/.installed: pyproject.toml
	python3 -m venv $(OPENENV_VENV)
	$(OPENENV_VENV)/bin/python -m pip install -q --upgrade pip
	$(OPENENV_VENV)/bin/python -m pip install -q -e '.[interop]'
	touch $@

# The browser tests (tests/test_web_page.py) drive Debian's Chromium through its chromedriver, which
# always match, being built from one source. Installed with apt-get when missing (CI runs as root);
# where that cannot be done the browser tests are skipped and say why. No `playwright install` or
# driver download: browsers are only to be had from Debian's packages here.
BROWSER_PACKAGES := chromium chromium-driver fonts-dejavu-core

.PHONY: run test lint browser
browser:
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing $(BROWSER_PACKAGES) for the browser tests"; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=120 \
			--no-install-recommends $(BROWSER_PACKAGES) >/dev/null; } \
		|| echo "warning: could not install Chromium: the browser tests will be skipped"; \
	else echo "warning: Chromium is missing and installing it needs root and apt-get: the browser tests will be skipped"; fi

# Silent recipe: inference.py's stdout is a contract of [START]/[STEP]/[END] lines only.
run: $(VENV)/.installed
	@$(PY) inference.py

lint: $(VENV)/.installed
	$(PY) -m ruff check .

test: lint $(OPENENV_VENV)/.installed browser
	$(PY) -m pytest -q
