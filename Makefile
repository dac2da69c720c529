# rdmaforge: `make demo` and `make test` work on a fresh Debian/Ubuntu machine, as root.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# Host tools the lab needs: systemd-nspawn, debootstrap, apt-ftparchive (mirror index), gpg (mirror signing);
# iperf3 for the pairwise unit test on loopback.
APT_PACKAGES := systemd-container debootstrap apt-utils gnupg openssh-client iproute2 ca-certificates make iperf3
NODES ?= 2
NICS ?= 2
PYTEST_ARGS ?=

.PHONY: help demo test lint bench deps venv lab-up lab-down clean

help:
	@echo "make demo   - set up, bring the lab up ($(NODES) nodes), rdmaforge provision, verify, doctor, bench, report"
	@echo "make test   - the whole test suite (unit + lab integration)"
	@echo "make lint   - ansible-lint (production), yamllint, ruff, mypy"
	@echo "make bench  - benchmarks (lab bring-up time, ...)"
	@echo "make lab-down - remove the lab"

deps:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if ! $(PYTHON) -c 'import ensurepip, venv' >/dev/null 2>&1; then missing="$$missing python3-venv"; fi; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

venv: $(VENV)/.installed

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

test: deps venv
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: venv
	$(BIN)/ansible-lint
	$(BIN)/yamllint -s .
	$(BIN)/ruff check .
	$(BIN)/mypy

bench: deps venv
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) .cache artifacts .pytest_cache .ruff_cache .mypy_cache
