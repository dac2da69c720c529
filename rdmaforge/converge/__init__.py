"""The fast no-op path: what a converge left on each node, and whether anything that decides it has changed.

- ``ledger``: turns the results of a converge's tasks into the resources to observe on each node (files,
  listings, packages, services, read-only commands), filled by the ``converge_ledger`` callback.
- ``digest``: the digests of what on the controller decides the desired state (the code, and each node's own
  variables for its node digest, every host's for the cluster digest), and the controller-side files the records
  keep file by file.
The node side (observe, record, compare) is the ``converge_state`` module.
"""
