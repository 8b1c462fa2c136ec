# Two commands on a fresh machine: `make serve` and `make test`.
PYTHON ?= python3
TOOLS := .tools
UV := $(TOOLS)/bin/uv
VENV := .venv
export UV_PYTHON_DOWNLOADS := never
export UV_PROJECT_ENVIRONMENT := $(VENV)

.PHONY: install serve test lint typecheck pytest bench soak clean

$(UV):
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install --quiet --disable-pip-version-check "uv>=0.5,<1"

# Bytecode is compiled at install (the dependencies by uv, the project's own sources here), so
# that the first `agentskit-chat` run does not compile every module it imports.
$(VENV)/.synced: $(UV) pyproject.toml uv.lock
	$(UV) sync --locked --extra dev --python $(PYTHON) --compile-bytecode
	$(VENV)/bin/python -m compileall -q src
	touch $@

install: $(VENV)/.synced

# The docs assistant over this project's own docs/ at http://127.0.0.1:8000 (the dev extra
# includes the server extra, so one install path serves both).
serve: install
	$(VENV)/bin/agentskit-chat serve docs

lint: install
	$(VENV)/bin/ruff check src tests bench examples
	$(VENV)/bin/ruff format --check src tests bench examples

typecheck: install
	$(VENV)/bin/mypy

pytest: install
	$(VENV)/bin/pytest

test: lint typecheck pytest

bench: install
	$(VENV)/bin/python bench/protocol.py
	$(VENV)/bin/python bench/answers.py
	$(VENV)/bin/python bench/ask.py
	$(VENV)/bin/python bench/ask_quality.py
	$(VENV)/bin/python bench/chat.py
	$(VENV)/bin/python bench/storage.py
	$(VENV)/bin/python bench/cli.py
	$(VENV)/bin/python bench/serve.py
	$(VENV)/bin/python bench/index.py

# Two chat workers under 32 clients for AGENTSKIT_SOAK_MINUTES (10 by default); exits 1 on an
# error or on worker memory growth of 5 % or more (docs/operations.md).
soak: install
	$(VENV)/bin/python bench/soak.py

clean:
	rm -rf $(VENV) $(TOOLS) .mypy_cache .ruff_cache .pytest_cache
