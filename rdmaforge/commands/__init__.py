"""Sub-commands of the ``rdmaforge`` CLI.

Every module in this package that defines ``register(subparsers)`` adds its own sub-command(s);
``register`` must call ``parser.set_defaults(func=...)`` where ``func(args) -> int`` is the exit code.
"""
