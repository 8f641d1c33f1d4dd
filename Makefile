# Two set-up commands, both working on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
LOGSCOPE := $(VENV)/bin/logscope
DEMO_LOG := examples/slurm-crash.out

.PHONY: demo test check lint install install-test clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install -q -e '.[test,lab,fleet]'
	touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

demo: $(VENV)/.installed
	@mkdir -p reports
	$(LOGSCOPE) analyze $(DEMO_LOG) || test $$? -eq 1
	$(LOGSCOPE) analyze $(DEMO_LOG) --format json > reports/demo-analysis.json || test $$? -eq 1
	@echo "wrote reports/demo-analysis.json"

lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check logscope tests bench
	$(VENV)/bin/ruff format --check logscope tests bench
	$(VENV)/bin/mypy

# The tests of real jobs (torchrun, SLURM) time how fast logscope notices a crash or a hang:
# they run one at a time, after the others have run on every core (pytest-xdist).
REAL_JOBS := lab or slurm

test: $(VENV)/.installed-test lint
	$(PY) -m pytest -q -n auto -m "not ($(REAL_JOBS))"
	$(PY) -m pytest -q -m "$(REAL_JOBS)"

# The edit-test loop: lint and the unit tests, without the expensive tiers (markers in
# pyproject.toml); `make test` runs them all.
CHECK_TIERS := not slow and not sweep and not lab and not slurm and not browser and not statistical and not hypothesis

check: $(VENV)/.installed-test lint
	$(PY) -m pytest -q -n auto -m "$(CHECK_TIERS)"

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
