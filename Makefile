# The README's set-up commands: `make demo`, `make test` (the full suite, on the real rig) and
# `make check` (lint, types and the tests that need no JVM, in seconds). Everything they need is
# installed here; `make install` puts `stream-recovery` on PATH.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
JARS   := .cache/jars
MVN    := mvn -B -q -s jvm/settings.xml
DEPPLUGIN := org.apache.maven.plugins:maven-dependency-plugin:3.8.1

BINDIR ?= $(HOME)/.local/bin

.PHONY: demo test check test-fast lint typecheck docs install uninstall jars venv clean cluster

demo: venv jars
	$(PY) -m recovery.local.demo

# A standalone Spark cluster (one master, one worker, on 127.0.0.1) from pyspark's own classes, in the
# foreground: prints MASTER=spark://... and a spark-submit example; Ctrl-C stops it.
cluster: venv jars
	$(PY) -m recovery.local.spark_cluster

test: venv jars lint typecheck docs
	$(PY) -m pytest

# The fast lane: no broker, no Spark, no JVM (tests/conftest.py marks every test that needs the rig
# `integration`, and fails an unmarked test that starts one anyway), and nothing marked `slow`; the
# docs site is built too.
check: venv lint typecheck docs
	$(PY) -m pytest -m "not integration and not slow" -q

test-fast: check

LINTED := $(wildcard recovery tests jobs benchmarks)

lint: venv
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)

typecheck: venv
	$(VENV)/bin/mypy --strict recovery

# The documentation site (mkdocs.yml, docs/): any warning fails the build.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir .cache/site

# `stream-recovery` is installed (editable) in the venv; this links it into $(BINDIR), which is on
# PATH on most systems (override: make install BINDIR=/somewhere/on/your/PATH).
install: venv
	mkdir -p $(BINDIR)
	ln -sfn $(CURDIR)/$(VENV)/bin/stream-recovery $(BINDIR)/stream-recovery
	@case ":$$PATH:" in \
	  *":$(BINDIR):"*) echo "stream-recovery -> $(BINDIR)/stream-recovery" ;; \
	  *) echo "$(BINDIR) is not on PATH: add it (export PATH=\"$(BINDIR):\$$PATH\") or run $(CURDIR)/$(VENV)/bin/stream-recovery" ;; \
	esac

uninstall:
	@if [ "$$(readlink $(BINDIR)/stream-recovery)" = "$(CURDIR)/$(VENV)/bin/stream-recovery" ]; then \
	  rm $(BINDIR)/stream-recovery && echo "removed $(BINDIR)/stream-recovery"; \
	else echo "$(BINDIR)/stream-recovery is not this checkout's link: left alone"; fi

venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is needed")'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[delta,spark,dev]'
	touch $@

# One idempotent step for both commands: each jar set is copied by mvn into a fresh directory that is
# renamed into place only when complete, so an interrupted fetch never leaves a half-filled cache.
jars: $(JARS)/kafka/.complete $(JARS)/spark/.complete
$(JARS)/%/.complete: jvm/%.pom.xml jvm/settings.xml
	@command -v mvn >/dev/null || { echo "Maven (mvn) is needed to fetch the rig's jars" >&2; exit 1; }
	rm -rf $(JARS)/$*.tmp $(JARS)/$*
	$(MVN) -f jvm/$*.pom.xml $(DEPPLUGIN):copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/$(JARS)/$*.tmp
	touch $(JARS)/$*.tmp/.complete
	mv $(JARS)/$*.tmp $(JARS)/$*

clean:
	rm -rf $(JARS) .pytest_cache .ruff_cache .mypy_cache .hypothesis
