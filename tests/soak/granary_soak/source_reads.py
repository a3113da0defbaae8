"""The source-read check: each byte of a dataset version is read from the
source at most once per cache group, outside the windows that lose it.

Every granaryd writes a source journal (--source-journal; its format in
cache_server/read_path/source_journal.h): each range it read from a source,
each range its store came to hold ("kept"), and each file whose chunks it
may no longer hold ("withdrawn": evicted, dropped for a damaged block, its
version removed, or found unwritten on a restart). Replaying all nodes'
journals in time order, a source read is a violation when:
- its node held some of those bytes when the read began (kept and not
  withdrawn since): the cache read again what it had;
- its node was reading some of them from the source at that moment for
  another reader, or for another fill: a read of bytes another read of the
  node fetches waits for it (a reader's read never waits for a fill's, and a
  fill's journal line cannot say whether the reader's was listed before it
  began, so a reader and a fill at once are counted apart, not named);
- another node of its group held some of them, or was reading them from the
  source at that moment, and the group's owners were the same since it got
  them: the group read them twice, where the chunk's owner should have read
  them once for all (a node that is not the owner asks the owner, which
  reads the miss through itself). Owners change with a node of the group
  killed, leaving or joining, cut off or its disk filled, a rolling restart,
  or etcd restarted (until RECOVERY after it): the chunk's new owner then
  reads it from the source while that is faster than copying it from the
  node that held it (read_path/fetch_speeds.h).
A chunk read again because its store declined it (a cache full of data in
use), could not store it (a full disk) or lost it is no violation: it was
never kept, or was withdrawn first. A store's "kept" is taken to hold from
SLACK after it was written down, the time a read that had just missed takes
to begin its source read.
"""
import collections
import json
import os

SLACK = 0.1
# Faults of a node that lose its chunks or let its peers read in its place.
NODE_FAULTS = {"kill_granaryd", "leave_join", "cut_link", "fill_disk"}
# Faults that change which node owns a chunk, in every group.
MEMBERSHIP_FAULTS = {"rolling_restart", "restart_etcd"}


def load(run_dir, node_ids):
    """Each node's journal lines, by node id (nodes without a journal left out)."""
    journals = {}
    for node in node_ids:
        path = os.path.join(run_dir, node, "source.jsonl")
        if os.path.exists(path):
            with open(path) as lines:
                journals[node] = [json.loads(line) for line in lines if line.strip()]
    return journals


def _overlap(intervals, begin, end):
    """The first of `intervals` ([b, e, since]) that overlaps [begin, end), or None."""
    return next((i for i in intervals if i[0] < end and begin < i[1]), None)


def judge(windows, history, journals, groups):
    """(violations, figures) of the journals `journals` (node id -> lines) of
    nodes in `groups` (node id -> group), judged against the faults of
    `windows` (checker.Windows) and the run's clock in `history`."""
    clock = next((r for r in history if r["type"] == "clock"), None)
    if clock is None or not journals:
        return ["no source journal was recorded: the source-read check proves nothing"], {}
    shift = clock["t"] - clock["unix"]
    events = []  # (time, order, node, line): ends before begins at one instant.
    for node, lines in journals.items():
        for line in lines:
            t = line["t"] + shift
            if line["event"] == "source_read":
                events.append((line["began"] + shift, 2, node, line))
                events.append((t, 0, node, {"event": "read_end", "of": line, **{
                    k: line[k] for k in ("version", "file", "chunk")}}))
            elif line["event"] == "kept":
                events.append((t + SLACK, 1, node, line))
            else:
                events.append((t, 0, node, line))
    events.sort(key=lambda e: (e[0], e[1]))

    # node -> (version, file) -> chunk -> [[begin, end, since]]
    held = collections.defaultdict(lambda: collections.defaultdict(
        lambda: collections.defaultdict(list)))
    reading = collections.defaultdict(list)  # (group, version, file, chunk) -> [[b, e, node, t]]
    violations = []
    figures = collections.Counter()

    def ownership_changed(since, t, group):
        """Whether the group's chunks may have changed owners between `since` and `t`."""
        return any(f[2] in MEMBERSHIP_FAULTS or f[2] in NODE_FAULTS and groups.get(f[3]) == group
                   for f in windows.open_at(since, t))

    for t, _, node, line in events:
        version, file = line["version"], line["file"]
        event = line["event"]
        if event == "kept":
            chunk = held[node][(version, file)][line["chunk"]]
            chunk.append([line["offset"], line["offset"] + line["length"], t - SLACK])
        elif event == "withdrawn":
            held[node].pop((version, file), None)
        elif event == "read_end":
            key = (groups[node], version, file, line["chunk"])
            reading[key] = [r for r in reading[key] if r[3] is not line["of"]]
        else:
            begin, end = line["offset"], line["offset"] + line["length"]
            figures["source_reads"] += 1
            figures["source_bytes"] += line["length"]
            where = (f"bytes [{begin}, {end}) of chunk {line['chunk']} of file {file} of "
                     f"{line['dataset']} version {version}, read from the source by {node} "
                     f"({line['for']}) at t={t:.2f}")
            mine = _overlap(held[node][(version, file)][line["chunk"]], begin, end)
            if mine:
                violations.append(f"{where}: {node} held bytes [{mine[0]}, {mine[1]}) of them "
                                  f"since t={mine[2]:.2f}")
            for other, group in groups.items():
                if other == node or group != groups[node]:
                    continue
                theirs = _overlap(held[other][(version, file)][line["chunk"]], begin, end)
                if theirs and not ownership_changed(theirs[2], t, group):
                    violations.append(f"{where}: {other}, of its group, held bytes "
                                      f"[{theirs[0]}, {theirs[1]}) of them since "
                                      f"t={theirs[2]:.2f}")
            key = (groups[node], version, file, line["chunk"])
            for other in reading[key]:
                if not (other[0] < end and begin < other[1]):
                    continue
                if other[2] == node and {other[3]["for"], line["for"]} == {"reader", "fill"}:
                    # A reader's blocks never wait behind a fill's chunk
                    # (read_through.h), so both may read them at once.
                    figures["reader_and_fill_at_once"] += 1
                elif other[2] == node or not ownership_changed(other[3]["began"] + shift, t,
                                                               groups[node]):
                    violations.append(f"{where}: {other[2]}, of its group, was reading bytes "
                                      f"[{other[0]}, {other[1]}) of them from the source then")
            reading[key].append([begin, end, node, line])
    figures["violations"] = len(violations)
    return violations, dict(figures)
