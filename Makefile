# Two commands for a fresh machine (see README):
#   make test   - create .venv if missing, install umlkit with its extras, run the test suite
#   make book   - same set-up, execute every chapter in the quick profile, build the HTML book in _build/html
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.umlkit-installed

.PHONY: test test-fast test-all test-cluster book install wordnet clean-book clean bench

# TORCH_INDEX: a package index to take torch and torchvision from first, e.g. the CPU builds on a machine without a
# GPU: make install TORCH_INDEX=https://download.pytorch.org/whl/cpu (PyPI's Linux torch is the CUDA build, ~6 GB)
TORCH_INDEX ?=

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	@if [ -z "$(TORCH_INDEX)" ] && ! command -v nvidia-smi >/dev/null 2>&1; then echo "umlkit: no GPU found; for \
	the CPU build of torch instead of the ~6 GB CUDA one, install into a fresh .venv with: make install \
	TORCH_INDEX=https://download.pytorch.org/whl/cpu"; fi
	$(if $(TORCH_INDEX),$(PY) -m pip install torch torchvision --index-url $(TORCH_INDEX))
	$(PY) -m pip install -e ".[book,test,lang]"
	$(PY) -m umlkit._install_check   # torch and torchvision of one release and build, or stop with the fix
	@touch $(STAMP)

install: $(STAMP) wordnet

# WordNet 3.0's database files for language guidance's word-hierarchy rows (Debian's wordnet-base, read offline by
# nltk); installed when this is a root shell with apt, else the command to run is printed. Without them the book
# still builds from the stored records and the rows' language files; only computing those files needs WordNet.
wordnet:
	@test -f $${UMLKIT_WORDNET:-/usr/share/wordnet}/data.noun || \
	{ if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get install -y --no-install-recommends wordnet-base >/dev/null || \
	    { apt-get update -qq && apt-get install -y --no-install-recommends wordnet-base >/dev/null; }; \
	  else echo "umlkit: WordNet 3.0 is not installed; for the WordNet rows run: sudo apt-get install wordnet-base"; fi; }

# everything but the recomputations of committed artefacts (their inputs' hashes are compared instead) and the
# heavy checks at real architectures: <= 8 min
# the suites run in TEST_WORKERS pytest-xdist processes of one torch thread each; a file's tests (and a notebook's
# cells) stay in one process (--dist loadfile). On 2 cores: 6.1 min against 10.3 min in one process of 2 threads.
# TEST_WORKERS=0 runs them in this process, as before.
TEST_WORKERS ?= 2
PYTEST = $(if $(filter 0,$(TEST_WORKERS)),$(PY) -m pytest,OMP_NUM_THREADS=1 $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile)

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PYTEST) tests book --nbval-lax --nbval-current-env -p no:cacheprovider -m "not recompute and not heavy and not cluster"

# the tests without the `slow` marker (torchrun, kill-and-resume, ...): 4.4 min on 2 cores (2026-11-26)
test-fast: $(STAMP)
	$(PYTEST) tests -m "not slow and not recompute and not heavy and not cluster" -p no:cacheprovider

# make test plus the recomputations of committed artefacts (a record retrained, the ooDML splits made again) and the
# heavy checks (one step of every full-profile job list); a recomputation that passes stores its inputs' hash in
# tests/artefact_inputs.json
test-all: $(STAMP)
	UMLKIT_RECORD_INPUTS=1 $(PYTEST) tests book --nbval-lax --nbval-current-env -p no:cacheprovider -m "not cluster"

# the Slurm executor against a real single-node Slurm on this machine (root; slurm-wlm and munge are installed from
# the distribution when absent): tools/slurm_local.sh starts slurmctld, slurmd and munged in a temporary folder, the
# tests in tests/cluster submit arrays to it, and the daemons are stopped whatever the outcome
test-cluster: $(STAMP)
	@d=$$(mktemp -d /tmp/umlkit-slurm-XXXXXX); \
	tools/slurm_local.sh start $$d || exit 1; \
	SLURM_CONF=$$d/slurm.conf UMLKIT_PROGRESS=0 $(PY) -m pytest tests/cluster -m cluster -p no:cacheprovider -v; s=$$?; \
	tools/slurm_local.sh stop $$d; rm -rf $$d; exit $$s

# jupyter-cache re-runs a chapter only when its code cells change; a change in src/umlkit (or the dependencies), in
# the configurations the chapters read, in the committed records and language files or in the book's CSS must also
# invalidate it, so
# the cache is dropped and every page rebuilt (--all) whenever those hash differently.
book: $(STAMP)
	@h=$$(find src pyproject.toml configs data/paper_tables results/quick/records results/quick/language _static -type f \( -name '*.py' -o -name '*.json' -o -name '*.toml' -o -name '*.yaml' -o -name '*.csv' -o -name '*.npz' -o -name '*.css' \) -print0 | sort -z | xargs -0 cat | sha256sum | cut -c1-16); \
	$(VENV)/bin/umlkit book sync-colab || exit 1; \
	all=""; if [ "$$(cat _build/.umlkit-src-hash 2>/dev/null)" != "$$h" ]; then rm -rf _build/.jupyter_cache; all="--all"; fi; \
	UMLKIT_PROGRESS=0 $(VENV)/bin/jupyter-book build . -W --keep-going $$all && echo $$h > _build/.umlkit-src-hash && \
	$(VENV)/bin/umlkit book check-html _build/html

bench: $(STAMP)
	$(PY) benchmarks/bench_eval.py

clean-book:
	rm -rf _build

clean: clean-book
	rm -rf $(VENV)
