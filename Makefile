# drift-harness — `make help` lists the targets.
VENV ?= .venv
PY := $(VENV)/bin/python
EXTRAS ?= dev,local,server,analysis,sweep,grounded,otel

.DEFAULT_GOAL := help

help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# llama.cpp's default build tunes for the build machine (GGML_NATIVE), AMX included, and
# its AMX kernels segfault in decode on some Sapphire Rapids hosts (llama.cpp #20824).
# Build a portable AVX2 wheel instead, never from pip's cache (which may hold a native one).
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip install --no-cache-dir 'llama-cpp-python==0.3.36'
	@# compat: the checkout on sys.path, so Hydra's plugin scan finds hydra_plugins/ (the in-process launcher)
	$(PY) -m pip install -e '.[$(EXTRAS)]' --config-settings editable_mode=compat
	touch $@

setup: $(VENV)/.installed ## Create .venv and install everything (llama.cpp builds from source)
	@# The checkout's bytecode, written now (compileall rewrites only what changed, ~0.1 s): where
	@# PYTHONDONTWRITEBYTECODE=1 is set (many containers, this CI) Python writes none itself, and
	@# every process (a run, a sweep's worker, a test's subprocess) compiled ~140 modules, ~0.3 s
	$(PY) -m compileall -q harness analysis hydra_plugins

run: setup ## Run the default experiment (drift format, SmolLM2, 3 rounds)
	$(PY) -m harness.run

debug: setup ## A debate on the scripted model that finishes in seconds
	$(PY) -m harness.run experiment=debug

test: setup lint ## What CI runs: lint, types, every test but `full` on 2 workers (fresh clone, build included: 18 min)
	$(PY) -m pytest -n 2 -m "not full" --durations=30

check: setup ## The fast tier, 118 s: scripted model, in-process only (no processes, servers, MiniLM, browser)
	$(PY) -m pytest -n 2 -q -m "not slow and not heavy and not network_loopback and not browser and not full"

test-all: setup ## Everything, `full` and the Ray launcher included (installs the [ray] extra first)
	$(PY) -m pip install --quiet -e '.[$(EXTRAS),ray]' --config-settings editable_mode=compat
	$(PY) -m pytest -n 2 --durations=30

test-fast: setup ## Every test that runs no real local model (in-process and subprocess alike)
	$(PY) -m pytest -n 2 -m "not slow"

lint: setup ## ruff (lint + format check), mypy and the import layers (lint-imports)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy harness analysis
	$(VENV)/bin/lint-imports

layers: setup ## Redraw docs/images/layers.svg from .importlinter's layers (docs/architecture.md)
	$(PY) docs/draw_layers.py

format: setup ## Apply ruff's formatting and safe fixes
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

STUDY := $(PY) -m analysis study --conditions debate,control_monologue,control_no_critic,control_cooperative \
	--temperatures 0.3,1.0 --replicates 3 --max-tokens 96 --workers 2 --seed 0 --set critic.max_iterations=2 \
	--set structured.echo_words=0  # made before the echo check of issue 30

# dated, as docs/findings-exploratory-2026-12-01.md is: a study made later keeps an earlier one's report
STUDY_REPORT ?= docs/findings-exploratory-$(shell date -u +%Y-%m-%d).md

study: setup ## The exploratory grid of 2026-12-01 (SmolLM2, Gemma 3 270M; about 2 h on 2 cores) into docs/findings-exploratory-<today>.md
	$(STUDY) --models smollm2 --rounds 5 --set model.grammar_mode=full --set model.prefix_cache=false --runs-only
	$(STUDY) --models gemma3_270m --rounds 3 --runs-only
	$(STUDY) --models smollm2,gemma3_270m --report-only --report $(STUDY_REPORT)

PILOT := $(PY) -m analysis study --root research_runs/pilot --models smollm2 --conditions debate,control_no_critic \
	--temperatures 1.0 --replicates 3 --rounds 5 --max-tokens 96 --workers 2 --seed 0 --set critic.max_iterations=2 --set structured.echo_words=0
LONG_RUN := DRIFT_WORKERS=2 $(PY) -m harness.run runs_root=research_runs/long llm.max_tokens=96 progress=false structured.echo_words=0

pilot: setup ## The confirmation's pilot: SmolLM2 T=1.0, debate and no-critic, 3 + 3 runs (14 min on 2 cores)
	$(PILOT) --runs-only

long: setup ## 50-round SmolLM2 runs, one per format, one thread each (drift 25 min, panel 8 min; docs/findings.md)
	$(LONG_RUN) run_name=smollm2-drift-50 experiment=drift_long critic.max_iterations=2
	$(LONG_RUN) run_name=smollm2-panel-50 format=panel format.judge=false rounds=50
	$(LONG_RUN) run_name=smollm2-judge_refine-50 format=judge_refine rounds=50
	$(LONG_RUN) run_name=smollm2-moderated-50 format=moderated format.exchanges=24
	$(LONG_RUN) run_name=smollm2-grounded-50 format=grounded rounds=50

confirm: setup ## The preregistered confirmation: docs/prereg.md's runs (commit it first; 18 runs, about 35 min)
	$(PY) -m analysis prereg --run docs/prereg.md

findings: setup ## docs/findings.md from the pilot, the confirmation (docs/prereg.md) and the long runs
	$(PILOT) --report-only --long research_runs/long

view: setup ## Serve the run viewer over research_runs/ on 127.0.0.1:8765
	$(PY) -m harness.view research_runs

bench: setup ## Run every benchmark in benchmarks/ at its short size, 14 min measured (prints measured ratios; LONG=0 skips the six longest: 9 min)
	@# sizes fit 15 min on 2 cores (859 s measured on an AVX2 EPYC); run a script by hand, as its docstring says, for its full size
	@# LONG=0 skips the four that run SmolLM2, the Gemma one and fault_soak
	@all=$$(date +%s); for f in benchmarks/*.py; do \
	  case $$(basename $$f) in \
	    smollm2_throughput.py|structured_decoding.py|llama_threads.py|fault_soak.py|plan_pilot.py|gemma_base_prompt.py) \
	      [ "$(LONG)" = 0 ] && { echo "== $$f skipped (LONG=0)"; continue; };; \
	  esac; \
	  case $$(basename $$f) in \
	    sweep_scale.py|structured_decoding.py|analysis_signals.py|analysis_load.py|api_sweep.py|panel_fanout.py) args=--quick;; \
	    detector_validity.py) args="--quick --tune-seeds 1 --held-seeds 1";; \
	    sweep_launchers.py) args="scripted --rounds 30";; \
	    smollm2_throughput.py) args="--rounds 1";; \
	    plan_pilot.py) args="--rounds 1 --cells 2";; \
	    gemma_base_prompt.py) args="--seeds 0 --styles completion";; \
	    store_build.py|store_search.py) args="--runs 200";; \
	    llama_threads.py) args="--repeats 1 --tokens 64";; \
	    fault_soak.py) args="--format all --cycles 2";; \
	    search_latency.py) args="--spawn-calls 3";; \
	    *) args=;; \
	  esac; \
	  echo "== $$f $$args"; one=$$(date +%s); $(PY) $$f $$args || exit 1; \
	  echo "== $$f: $$(( $$(date +%s) - one )) s"; done; \
	echo "== make bench: $$(( $$(date +%s) - all )) s in all, load $$(cut -d' ' -f1 /proc/loadavg)"

clean: ## Remove caches (keeps .venv and research_runs)
	rm -rf .pytest_cache .mypy_cache .ruff_cache

.PHONY: help setup run debug test check test-all test-fast lint layers format study pilot long confirm findings view bench clean
