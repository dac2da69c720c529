"""Training workloads for the cluster the inventory describes, as files to start them with.

Four kinds, all from the same inventory and NCCL settings that provision the hosts:

* ``docker``: per node, a ``docker run`` script and a systemd unit with the GPU runtime, host IPC and
  network, unlimited memlock and ``--device`` for rdma_cm and every uverbs device of the node (seed 000);
* ``acs``: an Alibaba Cloud ACS Deployment or Job with the RDMA labels and the NCCL settings of its GPU
  model (seed 002);
* ``mpijob``: a Kubeflow MPIJob, launcher plus one worker per node (seed 004);
* ``pytorchjob``: a Kubeflow PyTorchJob running torchrun with c10d rendezvous (seed 001).

This package is the one implementation: the role ``workload_manifests`` calls it through
``filter_plugins/rdmaforge_workloads.py`` and renders its templates with Ansible; ``rdmaforge render``
calls it on the output of ``ansible-inventory --list`` and renders the same templates with Jinja2.
Modules: ``options`` (the role's variables), ``nodes`` (per-node inputs), ``docker``, ``acs``,
``kubeflow`` and ``k8s`` (what each kind contains), ``plan`` (which files, from which template),
``render`` (templates to files), ``validate`` (schemas and API types).
"""

from __future__ import annotations

#: What can be rendered, in the order the files are planned.
KINDS: tuple[str, ...] = ("docker", "acs", "mpijob", "pytorchjob")
