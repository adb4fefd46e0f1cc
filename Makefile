# Two commands for a fresh machine (see README):
#   make test   - create .venv if missing, install umlkit with its extras, run the test suite
#   make book   - same set-up, execute every chapter in the quick profile, build the HTML book in _build/html
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.umlkit-installed

.PHONY: test book install clean-book clean bench

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -e ".[book,test,lang]"
	@touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest tests book --nbval-lax --nbval-current-env -p no:cacheprovider

book: $(STAMP)
	$(VENV)/bin/jupyter-book build . -W --keep-going

bench: $(STAMP)
	$(PY) benchmarks/bench_eval.py

clean-book:
	rm -rf _build

clean: clean-book
	rm -rf $(VENV)
