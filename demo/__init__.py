"""``make demo`` and the shared pieces of ``make bench``: a news site in front of weir.

dataset   the news-site schema, its generated data, and the site's queries and writes
workload  a timed mixed read/write load on client threads, with Zipf-distributed keys
probe     freshness probes: how long a write upstream takes to show through a cache
report    the comparison table and the PNG plots
procs     starting and stopping ``weir serve`` as a subprocess
run       the ``python -m demo`` entry point (Ctrl-C safe)
"""
