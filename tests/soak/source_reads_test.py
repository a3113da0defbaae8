"""The source-read check (granary_soak/source_reads.py) on journals written as
granaryd writes them (cache_server/read_path/source_journal.h): a range read
again while its node or another of its group held it is named; one read
again after its file was withdrawn, or never kept (declined), is not; a
group reading again what one of its nodes held, or two of its nodes reading
the same bytes at once, is named unless the group's owners changed since
(a node killed, leaving or cut off, a rolling restart, etcd restarted); one
node reading the same bytes twice at once is named, except a reader's
and a fill's, which are counted; a run without journals is
not clean.
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from granary_soak import checker, source_reads  # noqa: E402

UNIX = 1_765_000_000.0  # The wall clock when the run's history began (t=0).
GROUPS = {"n1": "rack-a", "n2": "rack-a", "n3": "rack-b", "n4": "rack-b"}
VERSION = "00000000000000aa"


def read(t, length=4096, offset=0, began=None, chunk=0, file=3, use="reader"):
    began = t - 0.01 if began is None else began
    return {"t": UNIX + t, "event": "source_read", "dataset": "images", "version": VERSION,
            "file": file, "chunk": chunk, "offset": offset, "length": length, "for": use,
            "began": UNIX + began}


def kept(t, length=4096, offset=0, chunk=0, file=3):
    return {"t": UNIX + t, "event": "kept", "version": VERSION, "file": file, "chunk": chunk,
            "offset": offset, "length": length}


def withdrawn(t, file=3):
    return {"t": UNIX + t, "event": "withdrawn", "version": VERSION, "file": file}


def history(*faults):
    records = [{"t": 0.0, "type": "clock", "unix": UNIX}]
    for i, (start, end, kind, target) in enumerate(faults):
        records.append({"t": start, "type": "fault_start", "id": i})
        records.append({"t": end, "type": "fault_end", "id": i, "kind": kind, "target": target})
    return records


def judge(journals, records=None):
    records = records or history()
    return source_reads.judge(checker.Windows(records), records, journals, GROUPS)


class SourceReadsTest(unittest.TestCase):
    def test_bytes_read_again_while_held_are_named(self):
        violations, figures = judge({"n1": [read(1), kept(1.1), read(5, offset=2048)]})
        self.assertEqual(len(violations), 1, violations)
        self.assertIn("by n1 (reader) at t=4.99: n1 held bytes [0, 4096)", violations[0])
        self.assertEqual(figures["source_reads"], 2)

    def test_bytes_withdrawn_or_never_kept_may_be_read_again(self):
        violations, _ = judge({"n1": [read(1), kept(1.1), withdrawn(3), read(5),
                                      read(6, chunk=1), read(7, chunk=1)]})
        self.assertEqual(violations, [])

    def test_other_bytes_of_a_held_chunk_may_be_read(self):
        violations, _ = judge({"n1": [read(1), kept(1.1), read(5, offset=4096, length=8192)]})
        self.assertEqual(violations, [])

    def test_a_group_reading_what_one_of_its_nodes_held_is_named(self):
        journals = {"n1": [read(1), kept(1.1)], "n2": [read(5)], "n3": [read(6)]}
        violations, _ = judge(journals)
        self.assertEqual(len(violations), 1, violations)
        self.assertIn("by n2 (reader) at t=4.99: n1, of its group, held", violations[0])

    def test_a_group_reading_the_same_bytes_at_once_is_named(self):
        journals = {"n1": [read(2, began=1)], "n2": [read(1.8, began=1.5)]}
        violations, _ = judge(journals)
        self.assertEqual(len(violations), 1, violations)
        self.assertIn("n1, of its group, was reading bytes [0, 4096)", violations[0])

    def test_a_change_of_owners_since_the_holder_got_them_explains_a_second_read(self):
        journals = {"n1": [read(1), kept(1.1)], "n2": [read(5)]}
        for fault in ((4, 4.5, "kill_granaryd", "n1"), (2, 3, "restart_etcd", None),
                      (3, 6, "leave_join", "n2"), (2, 3, "rolling_restart", None)):
            violations, _ = judge(journals, history(fault))
            self.assertEqual(violations, [], fault)
        # Owners settle within RECOVERY of a change.
        journals = {"n1": [read(31), kept(31.1)], "n2": [read(35)]}
        for fault in ((34, 36, "leave_join", "n3"), (5, 10, "rolling_restart", None)):
            violations, _ = judge(journals, history(fault))
            self.assertEqual(len(violations), 1, f"{fault} changes no owner of the group since")

    def test_one_node_reading_the_same_bytes_twice_at_once_is_named(self):
        for first, second in (("reader", "reader"), ("fill", "fill")):
            journals = {"n1": [read(1.2, began=1.0, length=8192, use=first),
                               read(1.5, began=1.1, length=1 << 20, use=second)]}
            violations, _ = judge(journals, history((0.5, 2, "rolling_restart", None)))
            self.assertEqual(len(violations), 1, (first, second))
            self.assertIn(f"by n1 ({second}) at t=1.10: n1, of its group, was reading bytes "
                          "[0, 8192)", violations[0])

    def test_a_readers_blocks_beside_a_fills_chunk_are_counted_not_named(self):
        for first, second in (("fill", "reader"), ("reader", "fill")):
            journals = {"n1": [read(1.5, began=1.0, length=1 << 20, use=first),
                               read(1.2, began=1.1, length=8192, use=second)]}
            violations, figures = judge(journals)
            self.assertEqual(violations, [], (first, second))
            self.assertEqual(figures["reader_and_fill_at_once"], 1)

    def test_a_run_without_journals_is_not_clean(self):
        violations, _ = judge({})
        self.assertEqual(len(violations), 1)
        self.assertIn("no source journal", violations[0])


if __name__ == "__main__":
    unittest.main()
