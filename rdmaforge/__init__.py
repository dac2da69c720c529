"""rdmaforge: provision RDMA-ready GPU training clusters with Ansible and prove them with benchmarks."""

__version__ = "0.1.0"
