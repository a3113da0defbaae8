#!/usr/bin/env python3
"""Prints store/plain throughput ratios from store_bench's JSON output.

usage: ratios.py store_bench.json
Uses the median wall-clock time of each benchmark's repetitions (or its
single run). CPU time is not compared: io_uring moves the copying to kernel
workers that the benchmark thread's CPU time does not include.
"""
import json
import sys


def medians(path):
    runs = json.load(open(path))["benchmarks"]
    by_name = {}
    for run in runs:
        if run.get("run_type") == "aggregate" and run.get("aggregate_name") != "median":
            continue
        name = run["run_name"].replace("/real_time", "")
        by_name[name] = run["real_time"]
    return by_name


def main():
    runs = medians(sys.argv[1])
    print("| chunk | page cache | store engine | store read / plain pread |")
    print("|---|---|---|---|")
    for chunk in (131072, 4194304):
        for cold in (0, 1):
            plain = runs[f"BM_PlainPread/chunk:{chunk}/cold:{cold}"]
            for uring in (1, 0):
                store = runs[f"BM_StoreRead/chunk:{chunk}/cold:{cold}/uring:{uring}"]
                print(f"| {chunk >> 10} KiB | {'cold, O_DIRECT' if cold else 'hot'} | "
                      f"{'io_uring' if uring else 'pread'} | {plain / store:.2f} |")
    print()
    print("| chunk | store engine | store insert / plain pwrite |")
    print("|---|---|---|")
    for chunk in (131072, 4194304):
        plain = runs[f"BM_PlainPwrite/chunk:{chunk}"]
        for uring in (1, 0):
            store = runs[f"BM_StoreInsert/chunk:{chunk}/uring:{uring}"]
            print(f"| {chunk >> 10} KiB | {'io_uring' if uring else 'pread'} | "
                  f"{plain / store:.2f} |")


if __name__ == "__main__":
    main()
