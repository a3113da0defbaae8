// The CLI's formatting pieces and its interrupt handling, in-process.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "cli/format.h"
#include "cli/interrupt_watcher.h"
#include "cli/json_output.h"
#include "cli/progress_bar.h"
#include "cli/table.h"

namespace granary::cli {
namespace {

TEST(Table, AlignsColumnsWithoutTrailingSpaces) {
  Table table({{"NAME"}, {"SIZE", Table::Align::kRight}, {"SOURCE"}});
  table.AddRow({"imagenet", "140.2 GiB", "/data/imagenet"});
  table.AddRow({"c4", "3 B", "/x"});
  EXPECT_EQ(table.Render(),
            "NAME           SIZE  SOURCE\n"
            "imagenet  140.2 GiB  /data/imagenet\n"
            "c4              3 B  /x\n");
}

// The soak (tests/soak) met "2 files of 'shards2' failed to prewarm" where
// two members' shares had failed, with no word of why.
TEST(Format, PrewarmFailuresCountFilesAndSharesAndSayWhy) {
  v1::PrewarmProgress progress;
  v1::FileFailure* share = progress.add_failures();
  share->set_error("n3: the cache did not keep what it fetched of 'ds'");
  v1::FileFailure* file = progress.add_failures();
  file->set_path("a/b.bin");
  file->set_error("source file changed");
  progress.add_failures()->set_error("n4: unreachable");
  EXPECT_EQ(PrewarmFailureCount(progress), "1 file and 2 nodes' shares");
  EXPECT_EQ(PrewarmFailuresText("ds", progress),
            "1 file and 2 nodes' shares of 'ds' failed to prewarm; the first: n3: the cache did "
            "not keep what it fetched of 'ds'");
  progress.mutable_failures()->DeleteSubrange(0, 1);
  EXPECT_EQ(PrewarmFailuresText("ds", progress),
            "1 file and 1 node's share of 'ds' failed to prewarm; the first: a/b.bin: source file "
            "changed");
}

TEST(Format, PercentRateDurationAndRatios) {
  EXPECT_EQ(FormatPercent(0.425), "42.5%");
  EXPECT_EQ(FormatPercent(1.0), "100.0%");
  EXPECT_EQ(FormatPercent(0.99999), "99.9%");
  EXPECT_EQ(FormatRate(3.5 * 1024 * 1024), "3.5 MiB/s");
  EXPECT_EQ(FormatDuration(7), "0:07");
  EXPECT_EQ(FormatDuration(754), "12:34");
  EXPECT_EQ(FormatDuration(3723), "1:02:03");
  EXPECT_EQ(FormatDuration(-1), "--:--");
  EXPECT_FALSE(HitRatio(0, 0).has_value());
  EXPECT_DOUBLE_EQ(*HitRatio(3, 1), 0.75);
  EXPECT_DOUBLE_EQ(Fraction(0, 0), 1.0);
  EXPECT_DOUBLE_EQ(Fraction(1, 4), 0.25);
}

v1::PrewarmProgress Progress(uint64_t done, uint64_t total, bool finished) {
  v1::PrewarmProgress progress;
  progress.set_bytes_done(done);
  progress.set_bytes_total(total);
  progress.set_bytes_per_second(1024 * 1024);
  progress.set_eta_seconds(static_cast<double>(total - done) / (1024 * 1024));
  progress.set_finished(finished);
  return progress;
}

TEST(ProgressBar, FiguresAndBar) {
  EXPECT_EQ(ProgressFigures(Progress(2 << 20, 8 << 20, false)),
            "25.0%  2.0 MiB / 8.0 MiB  1.0 MiB/s  ETA 0:06");
  EXPECT_EQ(ProgressFigures(Progress(8 << 20, 8 << 20, true)),
            "100.0%  8.0 MiB / 8.0 MiB  1.0 MiB/s  ETA 0:00");
  EXPECT_EQ(ProgressBarText(0.5, 12), "[#####-----]");
  EXPECT_EQ(ProgressBarText(1.5, 6), "[####]");
}

std::string ReadAll(std::FILE* file) {
  std::rewind(file);
  std::string text;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) text.append(buffer, n);
  return text;
}

TEST(ProgressBar, PlainLinesAreRateLimitedAndEndWithTheLastProgress) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  ProgressBar bar(out, /*interactive=*/false, "ds");
  bar.Update(Progress(1, 4, false));
  bar.Update(Progress(2, 4, false));  // Too soon after the first: not drawn.
  bar.Update(Progress(4, 4, true));
  bar.Finish();
  EXPECT_EQ(ReadAll(out),
            "prewarm ds: 25.0%  1 B / 4 B  1.0 MiB/s  ETA 0:00\n"
            "prewarm ds: 100.0%  4 B / 4 B  1.0 MiB/s  ETA 0:00\n");
  std::fclose(out);
}

TEST(ProgressBar, InteractiveRedrawsOneLine) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  ProgressBar bar(out, /*interactive=*/true, "ds");
  bar.Update(Progress(4, 4, true));
  bar.Finish();
  std::string text = ReadAll(out);
  EXPECT_EQ(text.front(), '\r');
  EXPECT_EQ(text.back(), '\n');
  EXPECT_NE(text.find("ds [#"), std::string::npos) << text;
  EXPECT_NE(text.find("100.0%"), std::string::npos) << text;
  std::fclose(out);
}

TEST(Json, PrewarmDocumentSaysPercentAndListsFailures) {
  v1::PrewarmProgress progress = Progress(4, 4, true);
  v1::FileFailure* failure = progress.add_failures();
  failure->set_path("a/b");
  failure->set_error("permission denied");
  nlohmann::json document = PrewarmJson("ds", progress, 1.5);
  EXPECT_EQ(document["percent"], 100.0);
  EXPECT_EQ(document["failures"][0]["path"], "a/b");
  EXPECT_EQ(document["name"], "ds");
}

TEST(Json, StatusHitRatioIsNullBeforeAnyRead) {
  v1::StatusResponse status;
  status.add_nodes()->set_node_id("n1");
  EXPECT_TRUE(StatusJson(status)["hit_ratio"].is_null());
  status.mutable_nodes(0)->set_hits(3);
  status.mutable_nodes(0)->set_misses(1);
  EXPECT_DOUBLE_EQ(StatusJson(status)["hit_ratio"].get<double>(), 0.75);
}

TEST(Format, NamesShowUtf8AndEscapeTheRest) {
  EXPECT_EQ(DisplayName("plain/name.jpg"), "plain/name.jpg");
  EXPECT_EQ(DisplayName("caf\xc3\xa9.jpg"), "caf\xc3\xa9.jpg");  // UTF-8 é.
  EXPECT_EQ(DisplayName("caf\xe9.jpg"), "caf\\xe9.jpg");         // Latin-1 é.
  EXPECT_EQ(DisplayName("a\\b"), "a\\\\b");
  EXPECT_EQ(DisplayName("new\nline\x7f"), "new\\x0aline\\x7f");
  EXPECT_EQ(DisplayName("c1\xc2\x85"), "c1\\xc2\\x85");       // U+0085, a C1 control.
  EXPECT_EQ(DisplayName("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // A surrogate.
  EXPECT_EQ(DisplayName("\xe2\x82"), "\\xe2\\x82");           // Truncated.
  EXPECT_EQ(DisplayName("\xf0\x9f\x90\x88"), "\xf0\x9f\x90\x88");
}

// Stray bytes travel as Python's surrogateescape writes them; everything else
// survives unchanged, the marks JsonName uses among them.
TEST(Json, NamesThatAreNotUtf8RoundTripAsSurrogates) {
  nlohmann::json document = {
      {"latin1", JsonName("caf\xe9.jpg")},
      {"utf8", JsonName("caf\xc3\xa9")},
      {"mark", JsonName("\xef\xbf\xbf\xee\x83\xa9")},  // U+FFFF, U+E0E9 themselves.
      {"backslash", JsonName("a\\uffff")},
  };
  const std::string text = FormatJson(document);
  EXPECT_NE(text.find(R"("latin1": "caf\udce9.jpg")"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("utf8": "caf\u00e9")"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("mark": "\uffff\ue0e9")"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("backslash": "a\\uffff")"), std::string::npos) << text;
}

TEST(InterruptWatcher, RunsTheCallbackOnSigintThenRestoresTheHandler) {
  struct sigaction before {};
  sigaction(SIGINT, nullptr, &before);
  std::atomic<int> calls{0};
  {
    auto watcher = InterruptWatcher::Start([&calls] { calls.fetch_add(1); });
    ASSERT_TRUE(watcher.ok()) << watcher.status();
    EXPECT_FALSE((*watcher)->interrupted());
    ::kill(::getpid(), SIGINT);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!(*watcher)->interrupted() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_TRUE((*watcher)->interrupted());
  }
  EXPECT_EQ(calls.load(), 1);
  struct sigaction after {};
  sigaction(SIGINT, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
}

}  // namespace
}  // namespace granary::cli
