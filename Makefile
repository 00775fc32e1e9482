# One entry point for people and CI. `make demo` and `make test` work on a fresh clone.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.installed-dev
# pytest-xdist workers for `make test` (each starts its own servers and browser; files are not split
# across workers, and the Spark files go to one worker together: one JVM). 2 uses both cores of the CI machine.
WORKERS ?= 2

.PHONY: demo test lint bench stack chaos dist docs docs-serve redis-server iproute2 chromium promtool clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,spark,console]'   # its build step generates mq/proxy/_pb (setup.py)
	touch $(STAMP)

demo: $(STAMP)            ## the end-to-end demo (embedded store unless MQ_URL is set)
	$(VENV)/bin/mq demo

redis-server:             ## the tests start their own redis-server processes: make sure the binary exists
	@command -v redis-server >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; \
	  else echo "redis-server is missing: install it (apt-get install redis-server) and rerun" >&2; exit 1; fi; }

iproute2:                 ## the partition suite (tests/faults/test_partitions.py) makes network namespaces with `ip` (root only)
	@command -v ip >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || { \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null; }

chromium:                 ## the console's browser tests drive Debian's chromium through Playwright (which never downloads a browser)
	@test -x /usr/bin/chromium || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "/usr/bin/chromium is missing: install it (apt-get install chromium) and rerun" >&2; exit 1; fi; }

# The package also enables a Prometheus service on :9090 where systemd runs: the tests start their own, so it is stopped.
promtool:                 ## the operator kit's tests (tests/operator) run promtool and prometheus, from Debian's prometheus package
	@command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null \
	    && { ! command -v systemctl >/dev/null 2>&1 || systemctl disable --now prometheus >/dev/null 2>&1 || true; }; \
	  else echo "promtool or prometheus is missing: install them (apt-get install prometheus) and rerun" >&2; exit 1; fi; }

test: $(STAMP) redis-server iproute2 chromium promtool  ## the whole suite (real redis-server processes on free loopback ports, headless chromium)
	$(PY) -m pytest -n $(WORKERS) --dist loadfile

lint: $(STAMP)           ## ruff (format and lint) and mypy --strict
	$(VENV)/bin/ruff format --check mq scheduler spark tests bench examples scripts
	$(VENV)/bin/ruff check mq scheduler spark tests bench examples scripts
	$(VENV)/bin/mypy

bench: $(STAMP) redis-server  ## producer benchmarks beside raw redis-py (see docs/benchmarks.md)
	$(PY) -m bench.producer
	$(PY) -m bench.aio_producer
	$(PY) -m bench.consumer
	$(PY) -m bench.timers
	$(PY) -m bench.orderly
	$(PY) -m bench.spark
	$(PY) -m bench.limits
	$(PY) -m bench.ha
	$(PY) -m bench.proxy

chaos: $(STAMP) redis-server  ## fault injection under load: kills, Redis restart, pauses (see tests/chaos.py)
	$(PY) -m tests.chaos --seconds 120 --rate 300

dist: $(STAMP)            ## the sdist and the wheel in dist/ (the endpoint's protobuf modules built into both), checked by twine
	rm -rf dist
	$(PY) -m build --outdir dist .
	$(VENV)/bin/twine check --strict dist/*

docs: $(STAMP)            ## the documentation site into site/ (mkdocs.yml); --strict: a broken link or anchor fails it
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

docs-serve: $(STAMP)      ## the site on http://127.0.0.1:8000/, rebuilt on every save (loopback only)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --dev-addr 127.0.0.1:8000

clean:
	rm -rf $(VENV) build dist site *.egg-info .pytest_cache .mypy_cache .ruff_cache

stack: $(STAMP) redis-server  ## the docker-compose topology as local processes on loopback (see docker/README.md)
	$(PY) scripts/stack.py
