"""Per-file cost of creating, then opening to read, N files in a directory:
run on the host and inside `airlock run` (bench/protect.sh)."""
import os
import sys
import time

d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(d, exist_ok=True)
t0 = time.perf_counter()
for i in range(n):
    with open(os.path.join(d, "f%d" % i), "w"):
        pass
t1 = time.perf_counter()
for i in range(n):
    with open(os.path.join(d, "f%d" % i)):
        pass
t2 = time.perf_counter()
print("create %.1f us/file  read-open %.1f us/file" % ((t1 - t0) / n * 1e6, (t2 - t1) / n * 1e6))
