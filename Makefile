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

.PHONY: demo test check test-fast lint typecheck docs install uninstall jars venv clean cluster test-matrix \
	test-kafka-matrix

demo: venv jars
	$(PY) -m recovery.local.demo

# A standalone Spark cluster (one master, one worker, on 127.0.0.1) from pyspark's own classes, in the
# foreground: prints MASTER=spark://... and a spark-submit example; Ctrl-C stops it.
cluster: venv jars
	$(PY) -m recovery.local.spark_cluster

# The 25 slowest tests are listed at the end: what the 30-minute budget of `make test` is spent on.
test: venv jars lint typecheck docs
	$(PY) -m pytest --durations=25

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

# The Spark version matrix (docs/spark-versions.md). The primary line is the venv's pyspark (4.2);
# each other line gets a venv of its own with that pyspark, and jars of its own (jvm/spark-<line>.pom.xml),
# under .cache/lines/<line>/ and .cache/jars/spark-<line>/: `make line-3.5` builds one. The rig picks
# the jar set by the running pyspark's line. `make test-matrix` runs the fidelity tests (marker
# `fidelity`) on every line, primary included, and writes the table from their results.
SPARK_LINES := 3.5 4.0 4.1
PINS_3.5 := pyspark==3.5.7 delta-spark==3.3.2
PINS_4.0 := pyspark==4.0.4 delta-spark==4.0.1
PINS_4.1 := pyspark==4.1.3 delta-spark==4.4.0
MATRIX := .cache/matrix

# Kept once made (make deletes a pattern rule's files that no rule names outright, as intermediate).
.PRECIOUS: $(JARS)/%/.complete $(JARS)/kafka-%/.complete .cache/lines/%/.installed
line-%: $(JARS)/kafka/.complete $(JARS)/spark-%/.complete .cache/lines/%/.installed
	@true
.cache/lines/%/.installed: pyproject.toml
	@test -n "$(PINS_$*)" || { echo "no Spark line $*: the lines are $(SPARK_LINES)" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is needed")'
	rm -rf .cache/lines/$*
	$(PYTHON) -m venv .cache/lines/$*/venv
	.cache/lines/$*/venv/bin/python -m pip install -q --upgrade pip
	.cache/lines/$*/venv/bin/python -m pip install -q -e '.[delta,dev]' $(PINS_$*)
	touch $@

test-matrix: venv jars $(foreach line,$(SPARK_LINES),line-$(line))
	rm -rf $(MATRIX) && mkdir -p $(MATRIX)
	$(PY) -m pytest -m fidelity -q -p no:cacheprovider --junitxml=$(MATRIX)/primary.xml || true
	for line in $(SPARK_LINES); do \
	  .cache/lines/$$line/venv/bin/python -m pytest -m fidelity -q -p no:cacheprovider \
	    --junitxml=$(MATRIX)/$$line.xml || true; \
	done
	$(PY) -m tests.spark_matrix $(MATRIX) docs/spark-versions.md README.md

# The Kafka version matrix (docs/kafka-versions.md): the same tests against other brokers. `make
# kafka-3.9.1` fetches one into .cache/jars/kafka-3.9.1/ (jvm/kafka.pom.xml at that version); the rig
# starts it when KAFKA_VERSION names it. `make test-kafka-matrix` runs the Kafka tests (marker `kafka`:
# tests/kafka, tests/runway, tests/hold) and the real-Spark shapes (`fidelity`) on the primary broker and on
# each of these, and writes the table from their results.
KAFKA_VERSIONS := 3.9.1 4.4.0
KAFKA_MATRIX := .cache/kafka-matrix
KAFKA_MATRIX_TESTS := tests/kafka tests/runway tests/hold tests/integration
kafka-%: $(JARS)/kafka-%/.complete
	@true
$(JARS)/kafka-%/.complete: jvm/kafka.pom.xml jvm/settings.xml
	@command -v mvn >/dev/null || { echo "Maven (mvn) is needed to fetch the rig's jars" >&2; exit 1; }
	rm -rf $(JARS)/kafka-$*.tmp $(JARS)/kafka-$*
	$(MVN) -f jvm/kafka.pom.xml -Dkafka.version=$* $(DEPPLUGIN):copy-dependencies -DincludeScope=runtime \
	  -Dkafka.storage.tests=$$(case $* in 3.*|4.[0-3].*) echo test;; *) echo test-fixtures;; esac) \
	  -DoutputDirectory=$(CURDIR)/$(JARS)/kafka-$*.tmp
	touch $(JARS)/kafka-$*.tmp/.complete
	mv $(JARS)/kafka-$*.tmp $(JARS)/kafka-$*

test-kafka-matrix: venv jars $(foreach version,$(KAFKA_VERSIONS),kafka-$(version))
	rm -rf $(KAFKA_MATRIX) && mkdir -p $(KAFKA_MATRIX)
	for version in primary $(KAFKA_VERSIONS); do \
	  KAFKA_VERSION=$$(test $$version = primary || echo $$version) $(PY) -m pytest -q -p no:cacheprovider \
	    -m "integration and (kafka or fidelity)" $(KAFKA_MATRIX_TESTS) \
	    --junitxml=$(KAFKA_MATRIX)/$$version.xml || true; \
	done
	$(PY) -m tests.kafka_matrix $(KAFKA_MATRIX) docs/kafka-versions.md README.md

clean:
	rm -rf $(JARS) .pytest_cache .ruff_cache .mypy_cache .hypothesis
