# The README's two set-up commands: `make demo` and `make test`. Everything they need is installed here.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
JARS   := .cache/jars
MVN    := mvn -B -q -s jvm/settings.xml
DEPPLUGIN := org.apache.maven.plugins:maven-dependency-plugin:3.8.1

.PHONY: demo test lint jars venv clean

demo: venv jars
	$(PY) -m recovery.local.demo

test: venv jars lint
	$(PY) -m pytest

LINTED := $(wildcard recovery tests jobs benchmarks)

lint: venv
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)

venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is needed")'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[spark,dev]'
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
	rm -rf $(JARS) .pytest_cache .ruff_cache .hypothesis
