# shoewarden — two commands on a fresh machine with only Python and make:
#   make run    set up .venv and run the main job
#   make test   set up .venv and run the whole test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/shoewarden check --profile gr-blackjack config/examples/gr-blackjack-day.jsonl

test: $(STAMP)
	$(BIN)/ruff check controller drivers simulators tests benchmarks
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check controller drivers simulators tests benchmarks

bench: $(STAMP)  ## print speed and memory figures
	$(BIN)/python benchmarks/run.py
	$(BIN)/python benchmarks/audit_bench.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache .hypothesis
