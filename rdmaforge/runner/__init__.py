"""Drive the playbooks through ansible-runner's Python API: live progress, a per-host recap, artifacts per run,
JUnit XML and exit codes for CI. The `provision`, `bench`, `doctor` and `verify` commands are built on it."""
