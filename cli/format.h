// Small text formats the CLI shares between its tables, summaries and progress
// lines: percentages, rates, durations and fills. The ratios themselves
// (Fraction, HitRatio) are common/reports/fraction.h's.
//
// Thread-safety: pure functions.
#ifndef GRANARY_CLI_FORMAT_H_
#define GRANARY_CLI_FORMAT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/base/utf8.h"
#include "common/reports/fraction.h"
#include "proto/granary.pb.h"

namespace granary::cli {

// `fraction` in [0, 1] as "42.5%", rounded down to a tenth of a percent.
std::string FormatPercent(double fraction);

// "12.3 MiB/s".
std::string FormatRate(double bytes_per_second);

// "0:07", "12:34", "1:02:03"; "--:--" for a negative or non-finite value, as
// an ETA is before the rate is known.
std::string FormatDuration(double seconds);
// A time (ms since 1970) as "2026-12-07 13:32:45 UTC".
std::string FormatUnixMs(int64_t unix_ms);

// A name from a dataset (Linux names are bytes) as a terminal shows it
// safely: UTF-8 characters as they are; bytes that are not UTF-8 and control
// characters as \xNN, and a backslash as \\, so that every name reads back
// unambiguously.
std::string DisplayName(std::string_view bytes);

// "on-read", "none", or "default" (each node's own).
std::string FillPolicyName(v1::FillPolicy policy);

// A fill's state: "45.0% at 180.2 MiB/s" while it runs, "done" after.
std::string FillText(const v1::FillProgress& fill);

// What failed of a prewarm: "2 files and 1 node's share". A failure without
// a path is a node's share as a whole (its member refused or was lost), not
// a file.
std::string PrewarmFailureCount(const v1::PrewarmProgress& progress);

// The error of a prewarm with failures: their count and the first of them,
// which says why ("1 node's share of 'ds' failed to prewarm; the first: n3:
// the cache did not keep ...").
std::string PrewarmFailuresText(std::string_view dataset, const v1::PrewarmProgress& progress);

}  // namespace granary::cli

#endif  // GRANARY_CLI_FORMAT_H_
