#!/usr/bin/env python3
"""Prints store/plain throughput ratios, and ranged against whole-chunk reads,
from store_bench's JSON output.

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


def read_table(runs):
    print("| chunk | page cache | store engine | store read / plain pread |")
    print("|---|---|---|---|")
    for chunk in (131072, 4194304):
        for cold in (0, 1):
            plain = runs[f"BM_PlainPread/chunk:{chunk}/cold:{cold}"]
            for uring in (1, 0):
                store = runs[f"BM_StoreRead/chunk:{chunk}/cold:{cold}/uring:{uring}"]
                print(f"| {chunk >> 10} KiB | {'cold, O_DIRECT' if cold else 'hot'} | "
                      f"{'io_uring' if uring else 'pread'} | {plain / store:.2f} |")


def insert_table(runs):
    print("| chunk | store engine | store insert / plain pwrite |")
    print("|---|---|---|")
    for chunk in (131072, 4194304):
        plain = runs[f"BM_PlainPwrite/chunk:{chunk}"]
        for uring in (1, 0):
            store = runs[f"BM_StoreInsert/chunk:{chunk}/uring:{uring}"]
            print(f"| {chunk >> 10} KiB | {'io_uring' if uring else 'pread'} | "
                  f"{plain / store:.2f} |")


def range_table(runs):
    print("| checksum block | page cache | 128 KiB range at | read time | "
          "whole 4 MiB chunk / range, per read |")
    print("|---|---|---|---|---|")
    for direct in (0, 1):
        whole = runs[f"BM_StoreReadRange/block:65536/direct:{direct}/range:0"]
        for block in (16384, 32768, 65536, 131072, 262144):
            for kind, where in ((1, "128 KiB multiples"), (2, "4 KiB multiples")):
                ranged = runs[f"BM_StoreReadRange/block:{block}/direct:{direct}/range:{kind}"]
                print(f"| {block >> 10} KiB | {'O_DIRECT' if direct else 'hot'} | {where} | "
                      f"{ranged / 1000:.1f} µs | {whole / ranged:.1f} |")


def main():
    runs = medians(sys.argv[1])
    # Each table of the benchmarks the run included (--benchmark_filter).
    tables = (("BM_StoreRead/", read_table), ("BM_StoreInsert/", insert_table),
              ("BM_StoreReadRange/", range_table))
    printed = False
    for prefix, table in tables:
        if any(name.startswith(prefix) for name in runs):
            if printed:
                print()
            table(runs)
            printed = True


if __name__ == "__main__":
    main()
