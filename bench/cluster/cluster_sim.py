#!/usr/bin/env python3
"""Runs cluster_sim (bench/cluster/cluster_sim.cc) over a range of cluster
sizes and writes its results: results.json, results.md (the tables at each
size) and sim_scaling.png (catalog and published-locality convergence time,
and bytes moved per join and leave, against cluster size).

  python3 bench/cluster/cluster_sim.py --build build --out-dir bench/cluster/results/sim

Arguments after `--` go to cluster_sim unchanged (--churn, --rtt-ms, ...).
"""

import argparse
import json
import os
import subprocess
import sys

GIB = 1024 ** 3


def seconds(value):
    if value < 0:
        return "not within a week"
    return "%.0f ms" % (value * 1000) if value < 1 else "%.1f s" % value


def gib(value):
    return "%.1f" % (value / GIB)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default="build", help="build directory with cluster_sim")
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--nodes", default="250,500,1000,2000,5000,10000",
                        help="comma-separated cluster sizes")
    args, passed = parser.parse_known_args()
    passed = [a for a in passed if a != "--"]
    binary = os.path.join(args.build, "bench", "cluster", "cluster_sim")
    sizes = [int(n) for n in args.nodes.split(",")]
    command = [binary, "--nodes"] + [str(n) for n in sizes] + passed
    print("running", " ".join(command), file=sys.stderr)
    report = json.loads(subprocess.run(command, check=True, capture_output=True,
                                       text=True).stdout)
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "results.json"), "w") as f:
        json.dump({"command": command, "report": report}, f, indent=2)

    clusters = report["clusters"]
    lines = [
        "`%s`" % " ".join(command),
        "",
        "Measured in the run: a manifest entry takes %.0f bytes loaded, %.0f encoded; a "
        "catalog record %.0f encoded." % (report["manifest_entry_memory_bytes"],
                                          report["manifest_entry_encoded_bytes"],
                                          report["catalog_record_encoded_bytes"]),
        "",
        "| nodes | member list with own ring, MiB | own ring MiB | manifests GiB (all loaded) "
        "| record change: returns, 99%, all | registration: 99%, all "
        "| registering node sent GiB | moved per leave / join GiB | moved / minimum, mean (worst) "
        "| moved per minute GiB | Locate (share answered) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in clusters:
        memory, change, registration = c["memory_per_node"], c["record_change"], c["registration"]
        churn, locate = c["churn"], c["locate"]
        lines.append(
            "| %d | %.1f | %.1f | %s | %s, %s, %s | %s, %s | %s | %s / %s | %.3f (%.3f) | %s "
            "| %s (%.3f) |" % (
                c["nodes"], memory["member_list_bytes"] / 2 ** 20,
                memory["own_ring_bytes"] / 2 ** 20, gib(memory["manifests_bytes"]),
                seconds(change["registration_returns_s"]), seconds(change["most_s"]),
                seconds(change["all_s"]), seconds(registration["most_s"]),
                seconds(registration["all_s"]), gib(registration["origin_sent_bytes"]),
                gib(churn["moved_bytes_per_leave"]), gib(churn["moved_bytes_per_join"]),
                churn["moved_over_minimum_mean"], churn["moved_over_minimum_worst"],
                gib(churn["moved_bytes_per_minute"]), seconds(locate["latency_s"]),
                locate["answered_share"]))
    lines += [
        "",
        "Published locality (LocalityBoard's gossip; a Locate reads it and calls no peer):",
        "",
        "| nodes | departed, still listed | changed holdings reach 50%, 99%, all "
        "| report ages a Locate reads: mean, 99%, max | live nodes shown "
        "| departed nodes still shown | gossip KiB per node per second |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in clusters:
        p = c["published_locality"]
        lines.append("| %d | %d | %s, %s, %s | %s, %s, %s | %.4f | %.3f | %.1f |" % (
            c["nodes"], c["dead_listed"], seconds(p["change_half_s"]), seconds(p["change_most_s"]),
            seconds(p["change_all_s"]), seconds(p["age_mean_s"]), seconds(p["age_p99_s"]),
            seconds(p["age_max_s"]), p["live_shown_share"], p["departed_shown_share"],
            p["bytes_per_node_per_s"] / 1024))
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(args.out_dir, "results.md"), "w") as f:
        f.write(text)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    nodes = [c["nodes"] for c in clusters]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for key, label in (("record_change", "record change (removal)"),
                       ("registration", "registration with its manifest")):
        for field, style in (("most_s", "--"), ("all_s", "-")):
            points = [(n, c[key][field]) for n, c in zip(nodes, clusters) if c[key][field] >= 0]
            left.plot([p[0] for p in points], [p[1] for p in points], linestyle=style,
                      marker="o", label="%s, %s" % (label, "99%" if field == "most_s" else "all"))
    for field, style in (("change_most_s", "--"), ("change_all_s", "-")):
        points = [(n, c["published_locality"][field]) for n, c in zip(nodes, clusters)
                  if c["published_locality"][field] >= 0]
        left.plot([p[0] for p in points], [p[1] for p in points], linestyle=style, marker="s",
                  label="published locality, %s" % ("99%" if field == "change_most_s" else "all"))
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("nodes")
    left.set_ylabel("seconds until live nodes hold the change")
    left.set_title("Catalog and locality convergence")
    left.legend(fontsize=7)
    right.plot(nodes, [c["churn"]["moved_bytes_per_leave"] / GIB for c in clusters], marker="o",
               label="per leave")
    right.plot(nodes, [c["churn"]["moved_bytes_per_join"] / GIB for c in clusters], marker="o",
               label="per join")
    right.plot(nodes, [c["churn"]["moved_bytes_per_minute"] / GIB / 100 for c in clusters],
               marker="o", linestyle="--", label="cluster-wide per minute / 100")
    right.set_xscale("log")
    right.set_xlabel("nodes")
    right.set_ylabel("GiB moved")
    right.set_title("Bytes moved by churn")
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out_dir, "sim_scaling.png"), dpi=100)


if __name__ == "__main__":
    main()
