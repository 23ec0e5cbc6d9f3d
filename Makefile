# gds-commission: every target sets itself up (Debian packages, .venv/) on a fresh machine.
SHELL := /bin/bash
.DEFAULT_GOAL := help
# CORE: the ansible-core release (requirements/core-CORE.txt): the newest by default, in .venv/;
# another in .venv-core-CORE/ (make demo CORE=2.19). scripts/find-python.sh picks its Python.
CORES := $(sort $(patsubst requirements/core-%.txt,%,$(wildcard requirements/core-*.txt)))
NEWEST_CORE := $(lastword $(CORES))
OLDEST_CORE := $(firstword $(CORES))
CORE ?= $(NEWEST_CORE)
VENV := $(if $(filter $(NEWEST_CORE),$(CORE)),.venv,.venv-core-$(CORE))
BIN := $(VENV)/bin
COLLECTION := collections/ansible_collections/gds/commission
# gdsbench's sources, shipped to the nodes by the gds_bench role; the lab (scripts, results) is bench/
GDSBENCH_SRC := $(COLLECTION)/roles/gds_bench/files/bench
GDSBENCH := $(GDSBENCH_SRC)/gdsbench
export PATH := $(CURDIR)/$(BIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export PYTHONDONTWRITEBYTECODE := 1
export GDS_SIM_ROOT := $(CURDIR)/build/sim

# Debian packages the controller-side tests and the demo use.
DEBS_BASE := python3-venv gcc make libc6-dev fio mdadm pciutils e2fsprogs
DEBS_BROWSER := chromium
# promtool (in Debian's prometheus) validates the textfile metrics; node_exporter serves them in a test
DEBS_METRICS := prometheus prometheus-node-exporter
# ansible-test sanity's shellcheck test (make lint)
DEBS_LINT := shellcheck
DEBS_VM := qemu-system-x86 qemu-utils debootstrap openssh-client e2fsprogs
# a real slurmctld/slurmd for the gds_slurm tests (tests/unit/test_slurm.py)
DEBS_SLURM := slurm-wlm munge

.PHONY: help setup debs test test-oldest unit lint sanity bench demo sim drift report vm-test vm-p2p molecule wheels clean fleet-perf capabilities roles quick ee
help:
	@echo "make demo     commission the bundled simulated nodes and write reports/latest/"
	@echo "make test     unit tests, benchmark tests, lint, molecule default (and vm when qemu is usable)"
	@echo "make drift    drift check (check mode) against the simulated nodes"
	@echo "make fleet-perf  commission + drift over 1/16/64/256 generated simulated nodes (SIZES=1,16)"
	@echo "make bench    build gdsbench ($(GDSBENCH_SRC)) and compare it with fio (bench/compare_fio.sh)"
	@echo "make vm-test  molecule vm scenario: a QEMU guest with NVMe behind PCIe switches"
	@echo "make vm-p2p   P2PDMA in the QEMU guest: each drive pair's predicted and real kernel verdict"
	@echo "make setup    create .venv/ with the pinned controller dependencies (CORE=2.19: .venv-core-2.19/)"
	@echo "make test-oldest  on the oldest ansible-core: demo, drift, sanity, the drift and fleet tests"
	@echo "make wheels   the wheels and collections tarball a GPU machine without an index needs (.whl/)"
	@echo "make ee       the collection tarball and the execution environment's build context (build/ee/)"
	@echo "make quick    the unit layer only (pytest -m unit: no playbook, no daemon), in minutes"
	@echo "make roles    write each role's defaults, argument specs and docs/variables.md table from its spec (ROLE_SPEC)"
	@echo "make capabilities  regenerate the collection's copy of gdsbench's vocabulary (measure/gdsbench_vocab.py)"

debs:
	@scripts/ensure-debs.sh $(DEBS_BASE)

$(VENV)/.stamp: requirements.txt requirements/core-$(CORE).txt scripts/setup-venv.sh
	@scripts/ensure-debs.sh $(DEBS_BASE)
	scripts/setup-venv.sh $(CORE) $(VENV)
	touch $@

setup: $(VENV)/.stamp

$(GDSBENCH): $(wildcard $(GDSBENCH_SRC)/*.c $(GDSBENCH_SRC)/*.h $(GDSBENCH_SRC)/Makefile)
	$(MAKE) -C $(GDSBENCH_SRC)

# gdsbench's vocabulary for the controller, generated from the benchmark's own tables (a build
# without CUDA prints the same: the vocabulary does not depend on the build)
capabilities:
	$(MAKE) -C $(GDSBENCH_SRC) nocuda
	python3 scripts/gdsbench-vocab.py $(GDSBENCH_SRC)/gdsbench-nocuda

# each role's defaults/main.yml, meta/argument_specs.yml and docs/variables.md table, from the spec of
# its area (ROLE_SPEC, listed in module_utils/roles.py); tests/unit/test_role_specs.py fails while one differs
roles: setup
	$(BIN)/python scripts/gen-roles.py

# Simulated nodes: fixture topologies turned into sysfs/procfs trees under build/sim/<host>/.
sim: setup
	$(BIN)/python tests/fixtures/simtree.py --inventory inventory/demo/hosts.yml --out build/sim

demo: setup sim $(GDSBENCH)
	$(BIN)/ansible-playbook -i inventory/demo playbooks/commission.yml

drift: setup
	@test -d build/sim || $(MAKE) sim
	$(BIN)/ansible-playbook -i inventory/demo playbooks/drift.yml --check

unit: setup $(GDSBENCH)
	$(BIN)/pytest -q tests

# the quick loop: the unit layer only (no playbook, no daemon; tests/conftest.py holds it to that)
quick: setup $(GDSBENCH)
	$(BIN)/pytest -q -m unit tests

lint: setup
	$(BIN)/ansible-lint --profile production -q
	for m in $(COLLECTION)/plugins/modules/*.py; do $(BIN)/ansible-doc -t module gds.commission.$$(basename $$m .py) >/dev/null || exit 1; done
	$(MAKE) sanity
	$(BIN)/ansible-galaxy collection build $(COLLECTION) --output-path build/collection --force

sanity: setup
	# ansible-test's own linters in their own virtual environments (pip downloads them the first time;
	# its pip bootstrap comes from a host outside the package index: a stand-in where that is unreachable)
	@scripts/ensure-debs.sh $(DEBS_LINT)
	cd $(COLLECTION) && $(CURDIR)/$(BIN)/python $(CURDIR)/scripts/ansible-test-bootstrap.py -- \
		$(CURDIR)/$(BIN)/ansible-test sanity --venv --requirements --python $$($(CURDIR)/$(BIN)/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')

# The execution environment for AWX / Automation Platform (execution-environment.yml): the built
# collection, then ansible-builder's context; `podman build -f build/ee/Containerfile build/ee`
# makes the image where a container runtime is.
ee: setup
	$(BIN)/ansible-galaxy collection build $(COLLECTION) --output-path build/collection --force
	$(BIN)/python scripts/ee-definition.py > build/execution-environment.yml
	$(BIN)/ansible-builder create --file build/execution-environment.yml --context build/ee --output-filename Containerfile

molecule: setup
	$(BIN)/molecule test -s default

vm-test: setup
	@scripts/ensure-debs.sh $(DEBS_VM)
	$(BIN)/molecule test -s vm

# P2PDMA on the guest's real kernel: the product's prediction for every drive pair against the
# kernel's answer (two boots: QEMU's max CPU with ACS set and cleared, then EPYC; docs/p2pdma.md)
vm-p2p: setup
	@scripts/ensure-debs.sh $(DEBS_VM)
	$(MAKE) -C $(GDSBENCH_SRC) nocuda
	GDS_VM_P2P=1 $(BIN)/pytest -q -rA -p no:cacheprovider tests/integration/test_guest_p2pdma.py

bench: setup $(GDSBENCH)
	bench/compare_fio.sh

# commission and drift over 1, 16, 64, 256 generated simulated nodes: wall time, ratios, memory
fleet-perf: setup $(GDSBENCH)
	$(BIN)/python tests/perf/fleet_perf.py $(if $(SIZES),--sizes $(SIZES))

test: setup
	@scripts/ensure-debs.sh $(DEBS_BROWSER) || echo "chromium unavailable: the HTML screenshot test will skip"
	@scripts/ensure-debs.sh $(DEBS_METRICS) || echo "prometheus unavailable: the promtool and node_exporter tests will skip"
	@scripts/ensure-debs.sh $(DEBS_SLURM) || echo "slurm-wlm unavailable: the Slurm tests will skip"
	$(MAKE) unit
	$(MAKE) lint
	$(MAKE) molecule
	@if scripts/ensure-debs.sh $(DEBS_VM) && [ -e /dev/kvm -o -x /usr/bin/qemu-system-x86_64 ]; then \
	  $(MAKE) vm-test && $(MAKE) vm-p2p; \
	else echo "SKIP vm-test: qemu-system-x86 could not be installed on this machine"; fi

# The oldest maintained ansible-core (CI runs it after `make test`, which is on the newest): the demo,
# drift, the collection's sanity, the drift-never-acts test and the fleet tests, in .venv-core-<oldest>/
FLEET_TESTS := tests/integration/test_drift_never_acts.py tests/unit/test_check_mode_contract.py tests/unit/test_fleet_scale.py \
	tests/integration/test_node_local.py tests/integration/test_sliced_run.py tests/unit/test_callback.py tests/unit/test_run_edges.py \
	tests/integration/test_demo.py
test-oldest:
	$(MAKE) CORE=$(OLDEST_CORE) demo
	$(MAKE) CORE=$(OLDEST_CORE) drift
	$(MAKE) CORE=$(OLDEST_CORE) sanity
	$(MAKE) CORE=$(OLDEST_CORE) setup $(GDSBENCH)
	.venv-core-$(OLDEST_CORE)/bin/pytest -q $(FLEET_TESTS)

# Wheels for CPython 3.12 manylinux x86_64 listed in scripts/carried-wheels.txt, and
# .whl/collections.tgz: what scripts/gpu-commission.sh and bench/gpu_*.sh install on a GPU machine.
wheels: setup
	PYTHON=$(BIN)/python scripts/carry-wheels.sh download

clean:
	rm -rf build reports $(COLLECTION)/tests/output
	$(MAKE) -C bench clean
