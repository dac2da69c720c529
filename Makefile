# rdmaforge: `make demo` and `make test` work on a fresh Debian/Ubuntu machine, as root.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# Host tools the lab needs: systemd-nspawn, debootstrap, apt-ftparchive (mirror index), gpg (mirror signing);
# iperf3 for the pairwise unit test on loopback; dnf, rpm (rpmbuild, rpmsign) and createrepo-c for the RHEL-family
# package path, run with Debian's real dnf (tests/unit/test_network_retries.py, tests/integration/test_dnf_path_on_lab.py).
APT_PACKAGES := systemd-container debootstrap apt-utils gnupg openssh-client iproute2 ca-certificates make iperf3 \
  dnf rpm createrepo-c
NODES ?= 2
NICS ?= 2
PYTEST_ARGS ?=

.PHONY: help demo test test-heavy lint bench deps venv lab-up lab-down clean collection dev-collection wheel

help:
	@echo "make demo   - set up, bring the lab up ($(NODES) nodes), rdmaforge provision, verify, doctor, bench, report"
	@echo "make test   - the whole test suite (unit + lab integration)"
	@echo "make test-heavy - the tests too long for make test (a fresh NCCL compile); make bench runs them first"
	@echo "make lint   - ansible-lint (production), yamllint, ruff, mypy"
	@echo "make bench  - benchmarks (lab bring-up time, ...)"
	@echo "make lab-down - remove the lab"
	@echo "make collection - build the rdmaforge.cluster collection tarball into build/ (ansible-galaxy collection build)"
	@echo "make wheel  - build the pip package (playbooks, roles and the collection included) into build/dist/"

deps:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if ! $(PYTHON) -c 'import ensurepip, venv' >/dev/null 2>&1; then missing="$$missing python3-venv"; fi; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

# The parser's C accelerator is built in place by the editable install: a changed source rebuilds it (an older
# build is ignored by rdmaforge.nccl_tests.accel, and the parser would fall back to pure Python).
$(VENV)/.installed: pyproject.toml setup.py rdmaforge/nccl_tests/_fastrows.c
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

# ansible.cfg finds the rdmaforge.cluster collection in build/collections (symlinks to this checkout's files).
dev-collection: $(VENV)/.installed
	$(BIN)/python -m rdmaforge.collection dev >/dev/null

# The editable package's bytecode, written even where PYTHONDONTWRITEBYTECODE is set (as in the shell this project
# is developed in): without it every ansible-playbook and rdmaforge process compiled the rdmaforge modules it
# imports again (0.1 to 0.3 s of CPU a process; make test starts hundreds). Only files changed since are redone.
venv: $(VENV)/.installed dev-collection
	$(BIN)/python -m compileall -q rdmaforge

collection: venv
	$(BIN)/python -m rdmaforge.collection build -o build

# setuptools reuses build/lib.* (build_support/rdmaforge_build.py clears its rdmaforge/ as well, for pip wheel .).
wheel: venv
	rm -rf build/lib.* build/bdist.*
	$(BIN)/pip wheel --no-deps -q -w build/dist .

lab-up: deps venv
	$(BIN)/rdmaforge lab up --nodes $(NODES) --nics $(NICS)

lab-down: venv
	$(BIN)/rdmaforge lab down

demo: deps venv
	$(BIN)/rdmaforge lab up --nodes $(NODES) --nics $(NICS)
	$(BIN)/rdmaforge provision -i inventories/lab/hosts.yml
	$(BIN)/rdmaforge verify -i inventories/lab/hosts.yml
	$(BIN)/rdmaforge doctor -i inventories/lab/hosts.yml
	@# A bench verdict other than pass (4 fail, 5 incomplete) is an answer, not a crash: everything is shown first,
	@# then make exits with bench's own code.
	rc=0; $(BIN)/rdmaforge bench -i inventories/lab/hosts.yml || rc=$$?; \
	$(BIN)/rdmaforge summary; \
	$(BIN)/rdmaforge report --latest || true; \
	echo "make demo: rdmaforge bench exited $$rc (0 pass, 4 fail, 5 incomplete: the verdict and its reasons are above)"; \
	exit $$rc

# The unit tests on 2 processes while the lab boots and converges, then the lab tests (tests/suite.py);
# RDMAFORGE_TEST_PHASES=0 runs one plain pytest instead.
test: deps venv
	$(BIN)/python -m tests.suite $(PYTEST_ARGS)

# What make test leaves out to stay within its time budget (tests marked heavy: a fresh NCCL compile, ~8 min).
test-heavy: deps venv
	RDMAFORGE_HEAVY_TESTS=1 $(BIN)/python -m pytest -m heavy $(PYTEST_ARGS)

lint: venv
	$(BIN)/ansible-lint
	$(BIN)/yamllint -s .
	$(BIN)/ruff check .
	$(BIN)/mypy

bench: deps venv test-heavy
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) .cache artifacts .pytest_cache .ruff_cache .mypy_cache
