# kebab-mlflow — `make help` lists the targets. `make run` and `make test` set up .venv themselves.
SHELL := /bin/bash
PY ?= python3
TORCH_INDEX ?=
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.DEFAULT_GOAL := help

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk -F':.*?## ' '{printf "  %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# CPU torch first and pinned: an unpinned torch would pull a multi-GB CUDA build. Here pip's
	# find-links hold the CPU wheel; elsewhere: make setup TORCH_INDEX=https://download.pytorch.org/whl/cpu
	$(BIN)/pip install -q torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/pip install -q -e '.[dense,server,test,bench,dask,tune,korean,docs]'
	@touch $(STAMP)

setup: $(STAMP) ## create or update the virtual environment (.venv)

run: $(STAMP) ## evaluate the shipped fixtures into the embedded MLflow store (mlruns/)
	$(BIN)/kebab-mlflow run

test: $(STAMP) ## run the test suite (unit, CLI, MLflow server and PostgreSQL tests)
	$(BIN)/python -m pytest

lint: $(STAMP) ## ruff, mypy --strict (settings in pyproject.toml) and the import-linter contracts
	$(BIN)/ruff check .
	$(BIN)/python -m mypy
	$(BIN)/lint-imports

bench: $(STAMP) ## run the benchmarks under bench/ (SciFact-scale; minutes); BENCH="bm25 metrics" for some
	$(BIN)/python bench/run_all.py $(BENCH)

ui: $(STAMP) ## open the MLflow UI on the embedded store
	$(BIN)/kebab-mlflow ui

ui-check: $(STAMP) ## check the MLflow UI in headless Chromium (installs chromium with apt if missing)
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || { \
		echo "installing chromium with apt-get"; SUDO=$$(command -v sudo || true); \
		$$SUDO apt-get update -q && $$SUDO apt-get install -y -q chromium; }
	$(BIN)/python scripts/ui_check.py $(if $(SCREENSHOTS),--screenshots $(SCREENSHOTS))

docs: $(STAMP) ## build the documentation site (mkdocs, material theme) into site/
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

clean: ## remove caches (keeps .venv and mlruns/)
	rm -rf .kebab-cache .pytest_cache .ruff_cache

.PHONY: help setup run test lint bench ui ui-check docs clean
