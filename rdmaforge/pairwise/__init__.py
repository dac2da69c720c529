"""`rdmaforge pairwise`: measure every node pair per rail, score the results and name the suspects.

schedule.py  which pairs run in which round (disjoint pairs per round)
plan.py      the rails (NICs) of each node and what each node does in a round
score.py     per-rail medians, slow pairs, node and link suspects
sendrecv.py  the GPU path: the mpirun + sendrecv_perf command line and its output, read by rdmaforge.nccl_tests
output.py    results.json, the per-rail matrix table, hostfile.healthy and the heat-map PNGs
report.py    `python -m rdmaforge.pairwise.report`: the role's raw measurements in, every output file out
"""
