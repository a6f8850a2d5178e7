# `make demo` runs the main job on the embedded simulator; `make test` runs the tests.
# Both set themselves up: `make install` (idempotent) creates .venv with sglab installed.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.sglab-installed

.PHONY: install test demo clean-venv

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -e '.[test]'
	@touch $(STAMP)

test: install
	@bash tools/install-browser.sh || echo "warning: no Chromium; the browser test will be skipped (fails under CI)"
	$(BIN)/python -m pytest -q -ra

# The main job on the embedded simulator: same-run A/B, verdict, report, promotion dry run.
STACK ?= eagle-nccl-ll
demo: install
	$(BIN)/sglab validate --stack $(STACK)
	$(BIN)/sglab bench --stack $(STACK) --target sim
	@# a refused promotion (reject/inconclusive) is an answer, not a failure of the demo
	-$(BIN)/sglab promote --stack $(STACK) --dry-run

clean-venv:
	rm -rf $(VENV)
