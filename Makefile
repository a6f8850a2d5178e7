# `make demo` runs the main job on the embedded simulator; `make test` runs the tests.
# Both set themselves up. `make install` (idempotent) creates .venv with sglab and what the simulator, validate,
# bench and the reports need: all the demo needs, no cluster tools, no test extras, no apt, no root.
# `make install-cluster` adds the cluster tools (Pulumi, the Helm engine, the Kubernetes clients: `pulumi up`,
# `sglab render`, `results pull`, `sweep --next`, `watch`). `make install-test` adds both and the test extras
# (pytest, torch for the NCCL probe's CPU test, selenium, ...); `make test` also installs SGLang's parser venv,
# Chromium and Prometheus (apt, as root) for the tests that need them. `make install` does not precompile
# (--no-compile): Python compiles a module the first time it is imported, so the demo's install does not compile the
# thousands of modules it never imports. The others do: where PYTHONDONTWRITEBYTECODE is set (CI images, containers)
# nothing is compiled at import either, and every one of the suite's hundreds of processes would compile its
# imports from source again (a clean-clone `make test` took 28 min instead of 20).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip install -q
STAMP := $(VENV)/.sglab-installed
CLUSTER_STAMP := $(VENV)/.sglab-cluster-installed
TEST_STAMP := $(VENV)/.sglab-test-installed

.PHONY: install install-cluster install-test lint test test-unit test-services demo image clean-venv sglang-contract-venv

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) --no-compile -e .
	@touch $(STAMP)

install-cluster: $(CLUSTER_STAMP)

$(CLUSTER_STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) -e '.[cluster]'
	@touch $(STAMP) $(CLUSTER_STAMP)

install-test: $(TEST_STAMP)

# One pip run for a fresh checkout: the test extras include sglab and its cluster tools, so every stamp is current
# after it.
$(TEST_STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) -e '.[test]'
	@touch $(STAMP) $(CLUSTER_STAMP) $(TEST_STAMP)

# The pinned SGLang release from PyPI in its own venv, for the real-parser contract test (tests/sglang_contract/):
# built once (about 2 minutes from this machine's disk), reused while its stamp matches the version.
sglang-contract-venv: install
	@bash tools/sglang-contract-venv.sh

# ruff check (the whole tree) and mypy (sglab/), both configured in pyproject.toml; `make test` runs it first.
lint: install-test
	$(BIN)/ruff check .
	$(BIN)/mypy

# Before the tests, at once: lint, SGLang's parser venv, and the browser and Prometheus the end-to-end tests use.
# The tests then run as five pytest processes (tools/run-tests.sh says which and why).
test: install-test
	@$(MAKE) --no-print-directory --output-sync=target -j3 lint sglang-contract-venv test-services
	@bash tools/run-tests.sh

# The unit tests alone (`-m "not slow"`: no simulator, no Locust; tests/slow_guard.py fails an unmarked test that
# starts one), for a quick check while editing; `make test` runs them with the end-to-end tests.
test-unit: install-test
	@bash tools/run-tests.sh -m "not slow"

test-services:
	@bash tools/install-browser.sh || echo "warning: no Chromium; the browser test will be skipped (fails under CI)"
	@bash tools/install-prometheus.sh || echo "warning: no Prometheus; the canary rehearsal tests will fail"

# The main job on the embedded simulator: same-run A/B, verdict, report, promotion dry run.
# `--quick`, the preset CI uses: concurrency 1 (gated: it runs sequentially and stops once its confidence sequence
# decides) and 4, rounds of 0.9 s with the simulators at 10x (the fastest time scale the simulator models
# faithfully at 4 streams: docs/simulator.md, "Time scale"). The arms run on two simulated nodes 4% apart and swap
# nodes every 4 rounds (policy.design: crossover), so the node difference is reported apart from the gain. Only this
# stack's own gate is run to a decision; the dry run is then refused, naming that the evidence is the simulator's.
# Measured: 2 min 18 s on a fresh 2-core clone, its install included (README). Where speculation stops paying
# (concurrency 16), in about 6-7 minutes: `sglab bench --stack eagle-nccl-ll --target sim --time-scale 3`.
STACK ?= eagle-nccl-ll
DEMO_BENCH ?= --quick
demo: install
	$(BIN)/sglab validate --stack $(STACK)
	$(BIN)/sglab bench --stack $(STACK) --target sim $(DEMO_BENCH)
	@# The dry run must refuse, because the evidence comes from simulators and production runs SGLang on GPUs: that
	@# refusal (exit 2) is the demo's expected answer, checked here; any other outcome, a write included, fails it.
	@echo "$(BIN)/sglab promote --stack $(STACK) --dry-run"
	@err=$$(mktemp); $(BIN)/sglab promote --stack $(STACK) --dry-run 2>$$err; status=$$?; cat $$err >&2; \
	if [ $$status -eq 2 ] && grep -q 'comes from simulators' $$err; then rm -f $$err; \
	echo "demo: promotion refused, as it must be for simulator evidence (above: why, and the command that measures the real servers)"; \
	else rm -f $$err; echo "demo: expected the dry run to refuse simulator evidence (exit 2), got exit $$status" >&2; exit 1; fi

# The project image (sglab + Locust + loadtests/: the benchmark Job, Locust, the disruption guard, the simulator).
# `make image` builds it with the local tag kind/minikube load for the sim stack and the default name GPU stacks
# pull (sglab:project-image); `make image REGISTRY=ghcr.io/<org>` also tags it there and pushes it (docs/deploy.md,
# "The project image"). Needs a Docker engine (or DOCKER=podman).
DOCKER ?= docker
REGISTRY ?=
image: install
	$(DOCKER) build --build-arg SGLAB_VERSION=$$($(BIN)/python -c 'import sglab; print(sglab.__version__)') \
		-t $$($(BIN)/python -m sglab.deploy.naming --local) -t $$($(BIN)/python -m sglab.deploy.naming) \
		$(if $(REGISTRY),-t $$($(BIN)/python -m sglab.deploy.naming --registry $(REGISTRY))) .
	$(if $(REGISTRY),$(DOCKER) push $$($(BIN)/python -m sglab.deploy.naming --registry $(REGISTRY)))

clean-venv:
	rm -rf $(VENV) .venv-sglang
