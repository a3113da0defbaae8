// Shows a prewarm's progress on standard error while it runs. On a terminal one
// line is redrawn in place ('\r') with a bar, the percentage, bytes, rate and
// ETA, at most ten times a second; elsewhere (a log file, CI) the same figures
// go out as a plain line every few seconds, so logs stay readable.
//
// Thread-safety: none; driven by the thread that reads the progress stream.
#ifndef GRANARY_CLI_PROGRESS_BAR_H_
#define GRANARY_CLI_PROGRESS_BAR_H_

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

#include "proto/granary.pb.h"

namespace granary::cli {

// "45.0%  1.2 GiB / 2.6 GiB  350.2 MiB/s  ETA 0:04".
std::string ProgressFigures(const v1::PrewarmProgress& progress);

// "[#########-----------]", `width` characters in all (at least 3).
std::string ProgressBarText(double fraction, int width);

class ProgressBar {
 public:
  // `label` names what is being prewarmed; `interactive` selects in-place
  // redraws (for a terminal) over plain lines.
  ProgressBar(std::FILE* out, bool interactive, std::string label);
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Shows `progress` unless the previous draw is too recent to redraw.
  void Update(const v1::PrewarmProgress& progress);

  // Draws the latest progress if it was not shown yet and ends the line.
  void Finish();

 private:
  void Draw();

  std::FILE* out_;
  bool interactive_;
  std::string label_;
  std::chrono::steady_clock::duration interval_;
  std::optional<std::chrono::steady_clock::time_point> last_draw_;
  std::optional<v1::PrewarmProgress> latest_;
  bool latest_drawn_ = false;
  size_t drawn_width_ = 0;  // Of the current in-place line, to blank leftovers.
};

}  // namespace granary::cli

#endif  // GRANARY_CLI_PROGRESS_BAR_H_
