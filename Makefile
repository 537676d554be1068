# Each target sets up the virtual environment it needs, so both work on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The stock OpenEnv package for the interop tests lives in a venv of its own: it pulls in gradio,
# fastapi and ~80 more packages that our runtime must not come to depend on by accident. It sits
# inside .venv because tools that walk the tree (`openenv validate`, Docker contexts) skip .venv.
OPENENV_VENV := $(VENV)/openenv

# A venv is known by the interpreter it runs: its base installation and version. One that another
# Python made (or whose Python is gone) is rebuilt rather than reused.
PYTHON_ID := import sys; print(sys.base_prefix, *sys.version_info[:2])
WANTED_ID := $(shell $(PYTHON) -c '$(PYTHON_ID)' 2>/dev/null)
ifeq ($(WANTED_ID),)
$(error $(PYTHON) does not run: set PYTHON to a Python 3.11 or newer)
endif
ifneq ($(shell $(PY) -c '$(PYTHON_ID)' 2>/dev/null),$(WANTED_ID))
$(VENV)/.runtime $(VENV)/.installed: rebuild
endif
ifneq ($(shell $(OPENENV_VENV)/bin/python -c '$(PYTHON_ID)' 2>/dev/null),$(WANTED_ID))
$(OPENENV_VENV)/.installed: rebuild
endif

# Two levels in .venv: `.runtime` is the package alone, what `make run` needs; `.installed` adds the
# `test` extra on top, for the tests and the tools.
$(VENV)/.runtime: REQUIREMENT := .
$(VENV)/.installed: REQUIREMENT := .[test]
$(VENV)/.installed: $(VENV)/.runtime
$(OPENENV_VENV)/.installed: REQUIREMENT := .[interop]

# Setting up says nothing on stdout: `make run`'s stdout carries only inference.py's contract lines.
# setuptools' note on every editable install of a package folder at the top of a repository
# ("Editable installation ... folders in your working directory") is not about this project: hidden.
define set_up
	@echo "setting up $(1)" >&2
	@if [ "$$($(1)/bin/python -c '$(PYTHON_ID)' 2>/dev/null)" != "$(WANTED_ID)" ]; then \
		rm -rf $(1) && $(PYTHON) -m venv $(1); fi
	@$(1)/bin/python -m pip install -q --upgrade pip >&2
	@PYTHONWARNINGS='ignore:Editable installation' $(1)/bin/python -m pip install -q -e '$(REQUIREMENT)' >&2
	@touch $@
endef
%/.runtime: pyproject.toml
	$(call set_up,$*)
%/.installed: pyproject.toml
	$(call set_up,$*)

# The browser tests (tests/test_web_page.py) drive Debian's Chromium through its chromedriver, which
# always match, being built from one source. Installed with apt-get when missing (CI runs as root);
# where that cannot be done the browser tests are skipped and say why. No `playwright install` or
# driver download: browsers are only to be had from Debian's packages here.
BROWSER_PACKAGES := chromium chromium-driver fonts-dejavu-core
# The scale-out tests (tests/test_scale_*.py) run two servers behind Debian's nginx with Debian's
# redis-server as their episode store, installed like Chromium, and skipped with a reason without.
SCALE_PACKAGES := nginx-light redis-server

# $(call debian,COMMANDS,PACKAGES,TESTS): install PACKAGES with apt-get unless every one of COMMANDS
# is there; where that cannot be done, say that TESTS will be skipped.
define debian
	@if $(foreach c,$(1),command -v $(c) >/dev/null 2>&1 &&) true; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing $(2) for $(3)"; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=120 \
			--no-install-recommends $(2) >/dev/null; } \
		|| echo "warning: could not install $(2): $(3) will be skipped"; \
	else echo "warning: $(1) missing, and installing needs root and apt-get: $(3) will be skipped"; fi
endef

.PHONY: run test test-install compile lint docs browser scale-services clean rebuild
browser:
	$(call debian,chromium chromedriver,$(BROWSER_PACKAGES),the browser tests)

scale-services:
	$(call debian,nginx redis-server,$(SCALE_PACKAGES),the scale-out tests)

# Silent recipe: inference.py's stdout is a contract of [START]/[STEP]/[END] lines only.
run: $(VENV)/.runtime
	@$(PY) inference.py

# An install compiles the core's kernels and hot modules in place (setup.py); after an edit of one's
# source, this compiles it again (until then an edited module runs its source: service_incident/compiled.py).
compile: $(VENV)/.installed
	@$(PY) setup.py -q build_ext --inplace >&2

# mypy has no package-dir: it checks server/ and client/ through links named as they install
# (pyproject.toml's [tool.mypy] reads them from .venv/mypy).
MYPY_LINKS := .venv/mypy/service_incident

lint: $(VENV)/.installed
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	@mkdir -p $(MYPY_LINKS)
	@ln -sfn ../../../server $(MYPY_LINKS)/server && ln -sfn ../../../client $(MYPY_LINKS)/client
	$(PY) -m mypy

# The generated tables of README.md and docs/*.md, rewritten from the definitions.
docs: $(VENV)/.installed
	$(PY) -m service_incident.harness.docs

# tests/conftest.py finds the stock OpenEnv venv through OPENENV_PYTHON. The tests that install the
# package into new venvs (marked slow) are `make test-install`'s, which CI runs after this. `-n auto`:
# a pytest-xdist worker a core; `--dist loadfile` keeps a file's tests on one worker, so its module
# fixtures (servers, stock runs, evaluations) are built once (`loadgroup` would group finer, but xdist
# 3.8 cannot rename pytest 9.2's node ids, so its groups are ignored). Set here, not in pytest's
# options: the venvs the slow tests build have no xdist.
test: compile lint $(OPENENV_VENV)/.installed browser scale-services
	OPENENV_PYTHON=$(abspath $(OPENENV_VENV))/bin/python $(PY) -m pytest -q -m 'not slow' -n auto --dist loadfile

# Every install path on fresh copies of the repository: pip install . and -e, the commands, make run.
test-install: $(VENV)/.installed
	$(PY) -m pytest -q -m slow

# Everything the targets above and the tests leave behind; tracked files are never touched.
clean:
	rm -rf $(VENV) .venvs build results test-artifacts .pytest_cache .ruff_cache .mypy_cache *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
	find service_incident -name "*.so" -delete
	rm -f service_incident/compiled.json
