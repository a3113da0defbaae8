"""The report of one run: report.md (how to replay it, the verdict and its
violations, the schedule, figures) and two plots: reads.png (verified reads
per second and failed reads over time, faults marked) and memory.png
(resident memory of every process).
"""
import collections
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402


MIB = 1 << 20
BIN = 5.0
LABELLED_FAULTS = 30  # Past this many, spans are told apart by colour alone.


def counter_totals(history):
    """Each counter summed over nodes, a drop (a restart) counted as a new start."""
    last = {}
    totals = collections.Counter()
    for r in history:
        if r["type"] != "metrics" or r["error"]:
            continue
        for name, value in r.get("counters", {}).items():
            before = last.get((r["node"], name), 0.0)
            totals[name] += value - before if value >= before else value
            last[(r["node"], name)] = value
    return totals


def _faults(history):
    starts = {r["id"]: r for r in history if r["type"] == "fault_start"}
    return [(starts[r["id"]]["t"], r["t"], r["kind"], r["target"], r) for r in history
            if r["type"] == "fault_end"]


def _plot_reads(history, faults, path):
    reads = [r for r in history if r["type"] == "read"]
    end = max((r["t"] for r in history), default=1.0)
    bins = int(end // BIN) + 1
    ok, failed = [0] * bins, [0] * bins
    for r in reads:
        (failed if "error" in r or "wrong" in r else ok)[int(r["t"] // BIN)] += 1
    x = [i * BIN for i in range(bins)]
    figure, axis = plt.subplots(figsize=(12, 4.5))
    axis.plot(x, [n / BIN for n in ok], label="verified reads/s", color="tab:blue")
    axis.bar(x, [n / BIN for n in failed], width=BIN, align="edge", color="tab:red",
             label="failed reads/s")
    colors = plt.get_cmap("tab10")
    kinds = sorted({f[2] for f in faults})
    for start, stop, kind, target, _ in faults:
        axis.axvspan(start, max(stop, start + 0.5), alpha=0.18, color=colors(kinds.index(kind)))
        if len(faults) <= LABELLED_FAULTS:
            axis.text(start, axis.get_ylim()[1] * 0.97, f"{kind} {target or ''}", rotation=90,
                      fontsize=7, va="top")
    axis.set_xlabel("seconds since the workload began")
    axis.set_ylabel("reads per second")
    handles, _ = axis.get_legend_handles_labels()
    handles += [Patch(color=colors(i), alpha=0.3, label=kind) for i, kind in enumerate(kinds)]
    axis.legend(handles=handles, loc="upper right", fontsize=7, ncol=2)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def _plot_memory(history, path):
    series = collections.defaultdict(lambda: ([], []))
    for r in history:
        if r["type"] == "sample":
            xs, ys = series[f"{r['name']} ({r['pid']})"]
            xs.append(r["t"])
            ys.append(r["rss"] / MIB)
    figure, axis = plt.subplots(figsize=(12, 4.5))
    for label, (xs, ys) in sorted(series.items()):
        axis.plot(xs, ys, label=label, linewidth=1)
    axis.set_xlabel("seconds since the workload began")
    axis.set_ylabel("resident MiB")
    axis.legend(fontsize=6, ncol=3, loc="upper left")
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def _object_store_line(history):
    s3 = next((r["s3"] for r in history if r["type"] == "datasets"), [])
    counts = next((r for r in history if r["type"] == "object_store"), {})
    if "object_gets" not in counts:
        return f"- object store ({', '.join(s3) or 'no dataset'}): its counts were not recorded"
    return (f"- object store ({', '.join(s3)}, through the SigV4 front end): "
            f"{counts['object_gets']} object GETs, {counts['precondition_failures']} answered "
            f"412 (the object changed since its manifest), {counts['signature_refusals']} "
            f"refused for their signature")


def _source_reads_line(source):
    if not source:
        return "- source reads: no journal was recorded"
    return (f"- source reads by granaryd (their journals): {source['source_reads']} reads, "
            f"{source['source_bytes'] / MIB:.0f} MiB; of bytes the node or its group held or "
            f"was reading then, outside the windows that lose them: {source['violations']}; "
            f"a reader's "
            f"and a fill's read of the same bytes at once on one node: "
            f"{source.get('reader_and_fill_at_once', 0)}")


def write(out_dir, history, verdict, run):
    """Writes the report under `out_dir`; `run` describes the run (seed, command, ...)."""
    faults = _faults(history)
    _plot_reads(history, faults, os.path.join(out_dir, "reads.png"))
    _plot_memory(history, os.path.join(out_dir, "memory.png"))
    totals = counter_totals(history)
    hits, misses = totals["granary_cache_hits_total"], totals["granary_cache_misses_total"]
    figures = verdict["figures"]
    workload_seconds = max((r["t"] for r in history), default=0.0)
    lines = [
        f"# Soak run, seed {run['seed']}",
        "",
        f"Verdict: **{'CLEAN' if verdict['clean'] else 'NOT CLEAN'}**"
        f" ({len(verdict['violations'])} violations)",
        "",
        f"Replay: `{run['command']}` (commit {run['commit']}, started {run['started']})",
        "",
        f"Wall time {run['wall_seconds']:.0f} s (setup {run['setup_seconds']:.0f} s, workload "
        f"{workload_seconds:.0f} s). Datasets {run['dataset_count']}, "
        f"{run['dataset_bytes'] / MIB:.0f} MiB in all; cluster cache "
        f"{run['cache_bytes'] / MIB:.0f} MiB ({run['dataset_bytes'] / run['cache_bytes']:.1f}x).",
        "",
        "## Violations", ""]
    lines += [f"- {v}" for v in verdict["violations"][:200]] or ["none"]
    if len(verdict["violations"]) > 200:
        lines.append(f"- ... and {len(verdict['violations']) - 200} more")
    lines += [
        "", "## Figures", "",
        f"- reads: {figures['reads']} ({figures['reads'] / max(workload_seconds, 1):.1f}/s), "
        f"{figures['failed_reads']} failed, {figures['bytes_verified'] / MIB:.0f} MiB verified",
        f"- successes by job kind: {figures['ok_by_kind']}; prewarms refused for a cache full "
        f"of data in use: {figures['prewarms_refused_cache_full']}",
        f"- hit ratio (chunk reads at granaryd): "
        f"{hits / (hits + misses):.3f}" if hits + misses else "- hit ratio: no reads counted",
        f"- bytes from the source {totals['granary_bytes_from_source_total'] / MIB:.0f} MiB, "
        f"from caches {totals['granary_bytes_from_cache_total'] / MIB:.0f} MiB, from peers "
        f"{totals['granary_bytes_from_peers_total'] / MIB:.0f} MiB; chunks evicted "
        f"{totals['granary_store_evicted_chunks_total']:.0f}, declined by the eviction policy "
        f"{totals['granary_store_admissions_refused_total']:.0f}, failed to store "
        f"{totals['granary_store_insert_errors_total']:.0f}, checksum failures "
        f"{totals['granary_store_checksum_failures_total']:.0f}",
        _object_store_line(history),
        _source_reads_line(figures.get("source_reads", {})),
        f"- catalog and membership converged {figures['converged_seconds']} s after the "
        f"last fault (t={figures['last_fault_end']:.1f})",
        "- peaks: " + ", ".join(f"{name} {p['rss'] / MIB:.0f} MiB / {p['fds']} fds"
                                for name, p in sorted(figures["peaks"].items())),
        "", "![reads per second, faults marked](reads.png)", "",
        "![resident memory](memory.png)", "",
        "## Schedule", "", "| start | end | fault | target | detail |", "|---|---|---|---|---|"]
    for start, stop, kind, target, record in faults:
        detail = {k: v for k, v in record.items()
                  if k not in ("t", "type", "id", "kind", "target")}
        if "changed" in detail:
            detail["changed"] = f"{len(detail['changed'])} files"
        lines.append(f"| {start:.1f} | {stop:.1f} | {kind} | {target or ''} | {detail or ''} |")
    with open(os.path.join(out_dir, "report.md"), "w") as out:
        out.write("\n".join(lines) + "\n")
