"""The fast no-op path: what a converge left on each node, and whether anything that decides it has changed.

- ``ledger``: turns the results of a converge's tasks into the resources to observe on each node (files,
  listings, packages, services, read-only commands), filled by the ``converge_ledger`` callback.
- ``digest``: one digest of everything on the controller that decides the desired state (the code, every
  host's variables, controller-side files).
The node side (observe, record, compare) is the ``converge_state`` module.
"""
