#include "cli/progress_bar.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cli/format.h"
#include "common/base/size.h"

namespace granary::cli {
namespace {

using std::chrono::steady_clock;

constexpr auto kInteractiveInterval = std::chrono::milliseconds(100);
constexpr auto kPlainInterval = std::chrono::seconds(2);
constexpr int kMaxBarWidth = 32;
constexpr int kMinBarWidth = 8;
constexpr int kFallbackTerminalWidth = 80;

int TerminalWidth(std::FILE* out) {
  winsize size{};
  if (ioctl(fileno(out), TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return kFallbackTerminalWidth;
}

}  // namespace

std::string ProgressFigures(const v1::PrewarmProgress& progress) {
  return absl::StrCat(FormatPercent(Fraction(progress.bytes_done(), progress.bytes_total())), "  ",
                      FormatSize(progress.bytes_done()), " / ", FormatSize(progress.bytes_total()),
                      "  ", FormatRate(progress.bytes_per_second()), "  ETA ",
                      FormatDuration(progress.finished() ? 0 : progress.eta_seconds()));
}

std::string ProgressBarText(double fraction, int width) {
  int inside = std::max(width - 2, 1);
  int filled = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * inside);
  return absl::StrCat("[", std::string(filled, '#'), std::string(inside - filled, '-'), "]");
}

ProgressBar::ProgressBar(std::FILE* out, bool interactive, std::string label)
    : out_(out),
      interactive_(interactive),
      label_(std::move(label)),
      interval_(interactive ? steady_clock::duration(kInteractiveInterval)
                            : steady_clock::duration(kPlainInterval)) {}

void ProgressBar::Update(const v1::PrewarmProgress& progress) {
  latest_ = progress;
  latest_drawn_ = false;
  steady_clock::time_point now = steady_clock::now();
  if (last_draw_ && now - *last_draw_ < interval_) return;
  last_draw_ = now;
  Draw();
}

void ProgressBar::Finish() {
  if (latest_ && !latest_drawn_) Draw();
  if (interactive_ && drawn_width_ > 0) std::fputc('\n', out_);
  drawn_width_ = 0;
  std::fflush(out_);
}

void ProgressBar::Draw() {
  latest_drawn_ = true;
  std::string figures = ProgressFigures(*latest_);
  if (!interactive_) {
    std::fprintf(out_, "prewarm %s: %s\n", label_.c_str(), figures.c_str());
    std::fflush(out_);
    return;
  }
  std::string line = label_;
  int room = TerminalWidth(out_) - 1 - static_cast<int>(label_.size() + figures.size() + 2);
  int bar_width = std::min(room - 1, kMaxBarWidth);
  if (bar_width >= kMinBarWidth) {
    absl::StrAppend(
        &line, " ",
        ProgressBarText(Fraction(latest_->bytes_done(), latest_->bytes_total()), bar_width));
  }
  absl::StrAppend(&line, "  ", figures);
  // Pad over what is left of a longer previous line instead of relying on
  // terminal escapes, which not every terminal understands.
  size_t width = line.size();
  if (width < drawn_width_) line.append(drawn_width_ - width, ' ');
  drawn_width_ = width;
  std::fprintf(out_, "\r%s", line.c_str());
  std::fflush(out_);
}

}  // namespace granary::cli
