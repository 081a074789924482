# shoewarden — three commands on a fresh machine with only Python and make:
#   make run    set up .venv and run the main job (a bench run on simulated devices)
#   make test   set up .venv and run the whole test suite
#   make demo   simulated tables dealing at a human pace, the floor following them (URLs printed)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test quick lint bench clean browser servers demo compiler native

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# (the compiled modules are built by their own rule below, not by the install: so that a
# source edited later is compiled again, and a machine without gcc still installs)
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip 'setuptools>=77'
	SHOEWARDEN_NO_COMPILE=1 $(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# The card loops compiled by mypyc (controller/native.py): rebuilt when a
# source changes. Without gcc and the Python headers nothing compiles (a warning) and the
# sources run: the same decisions, slower. `make test` installs both (test_native.py fails
# without them); `make run` does not need them.
NATIVE := controller/native.json
NATIVE_SOURCES := controller/screening/reference.py controller/screening/packets.py \
                  controller/screening/screen.py controller/rounds.py \
                  controller/games/baccarat.py controller/games/blackjack.py controller/games/stud.py \
                  controller/audit/replay.py controller/audit/linecheck.py
# (and every project module they import, as the last build listed them: a change to any of
# them changes the compiled code, which runs only while all are as built)
NATIVE_DEPS := $(shell cat controller/native.deps 2>/dev/null)
$(NATIVE): setup.py controller/native.py $(NATIVE_SOURCES) $(NATIVE_DEPS) | $(STAMP)
	$(BIN)/python setup.py --quiet build_ext --inplace

native: | $(STAMP)  ## compile the card loops again (mypyc; needs gcc and the Python headers)
	$(BIN)/python setup.py --quiet build_ext --inplace

# one goal at a time: `compiler` removes $(NATIVE) for $(NATIVE) to be made again after it
.NOTPARALLEL:

compiler:
	@command -v gcc >/dev/null && $(BIN)/python -c 'import os, sys, sysconfig; \
	  sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' || { \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update && $$SUDO apt-get install -y gcc python3-dev && rm -f $(NATIVE); }

run: $(STAMP) $(NATIVE)  ## a bench run: the controller against simulated devices on virtual serial ports
	$(BIN)/shoewarden bench --profile gr-blackjack --shoes 2 --seed 7

demo: $(STAMP) $(NATIVE)  ## six tables of different profiles, the floor and their dealer displays
	$(BIN)/shoewarden demo --tables 6

# the browser tests drive Debian's headless Chromium; installed when missing, as the venv is
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update && $$SUDO apt-get install -y chromium chromium-driver; }

# the database floor's tests start private servers from Debian's nats-server and postgresql
servers:
	@command -v nats-server >/dev/null && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update && $$SUDO apt-get install -y nats-server postgresql; }

# A worker a core. Two a core were quicker on an idle 2-core machine (28 Nov 2026: 218–226 s
# against 225–252 s; three a core 203 s), but the bench scenarios that inject link faults on
# a timer (shoe-wire-faults) failed under that load, and CI must not be flaky for 30 s
WORKERS := auto

test: $(STAMP) compiler $(NATIVE) browser servers
	$(BIN)/ruff check controller drivers simulators floor tests benchmarks setup.py
	$(BIN)/mypy
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n $(WORKERS) --dist loadfile  # a file stays on one worker (fixed paths)

# Tests are handed out by work stealing (with `load`, the tests left to one worker kept it busy 7 s
# after the other had finished), and compiled test modules are kept between runs (an
# environment that sets PYTHONDONTWRITEBYTECODE made each worker re-rewrite every test
# module's asserts: collection 5.7 s instead of 1.9)
quick: $(STAMP) $(NATIVE)  ## the inner loop: no slow tests, a tenth of the Hypothesis examples, every core
	PYTHONDONTWRITEBYTECODE= HYPOTHESIS_PROFILE=quick $(BIN)/python -m pytest -m 'not slow' \
	  -n auto --dist worksteal

lint: $(STAMP)
	$(BIN)/ruff check controller drivers simulators floor tests benchmarks setup.py
	$(BIN)/mypy

BENCHES := run.py audit_bench.py device_bench.py "receive_fuzz.py --streams 100000" \
           paths.py log_floor.py shuffle_screen.py floor_bench.py floor_nats_bench.py

# every benchmark runs and prints its figures, a missed target or not; the exit status
# says whether any missed (names them at the end)
bench: $(STAMP) $(NATIVE) servers  ## print speed and memory figures
	@missed=""; for b in $(BENCHES); do \
	  echo "$(BIN)/python benchmarks/$$b"; \
	  $(BIN)/python benchmarks/$$b || missed="$$missed $${b%% *}"; \
	done; \
	if [ -n "$$missed" ]; then echo "make bench: a target missed or a run failed in:$$missed"; exit 1; fi

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache .hypothesis $(NATIVE) controller/native.deps *__mypyc*.so
	find controller -name '*.so' -delete
