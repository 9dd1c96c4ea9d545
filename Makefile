# Two commands do all set-up: `make run` (the main job on embedded defaults) and `make test`.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
AR1    := $(VENV)/bin/agent-r1
STAMP  := $(VENV)/.installed
PARAMS ?= params.yaml

.PHONY: install run test bench rollout clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first and pinned: the CPU wheel; an unpinned torch would pull a multi-GB CUDA build
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# The main job: synthetic data -> tantivy index -> SFT warm start -> RL (GRPO) -> held-out eval.
run: $(STAMP)
	$(AR1) sft --params $(PARAMS)
	$(AR1) train --params $(PARAMS)
	$(AR1) rollout --params $(PARAMS) --model runs/default/init_model -n 2 --greedy
	$(AR1) rollout --params $(PARAMS) --model "runs/default/checkpoints/$$(cat runs/default/checkpoints/latest)" -n 2 --greedy

rollout: $(STAMP)
	$(AR1) rollout --params $(PARAMS) -n 4

# pytest exits 5 when it collects no test: that is a failure here, never a silent pass.
test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider

bench: $(STAMP)
	$(PY) benchmarks/retrieval.py
	$(PY) benchmarks/learning.py --quick

clean:
	rm -rf runs data benchmarks/.work
