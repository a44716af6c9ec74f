#include "ctl/progress.h"

#include <unistd.h>

#include <iostream>

#include "absl/strings/str_format.h"
#include "ctl/status.h"

namespace steward {
namespace {

constexpr auto kTtyEvery = std::chrono::milliseconds(200);
constexpr auto kPlainEvery = std::chrono::seconds(5);

std::string Clock(double seconds) {
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return absl::StrFormat("%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60);
  return absl::StrFormat("%d:%02d", s / 60, s % 60);
}

}  // namespace

static std::string Bytes(uint64_t n) { return HumanBytes(static_cast<int64_t>(n)); }

std::string FormatProgress(const std::string& label, uint64_t bytes, uint64_t total,
                           double seconds) {
  std::string out = label + ": " + Bytes(bytes);
  if (total > 0) {
    const uint64_t shown = bytes > total ? total : bytes;
    out += absl::StrFormat(" / %s (%d%%)", Bytes(total), shown * 100 / total);
  }
  if (seconds > 0) {
    const double rate = static_cast<double>(bytes) / seconds;
    out += "  " + Bytes(static_cast<uint64_t>(rate)) + "/s";
    if (total > 0 && rate > 0) {
      const double left = bytes >= total ? 0 : static_cast<double>(total - bytes) / rate;
      out += "  ETA " + Clock(left);
    }
  }
  return out;
}

std::string FormatProgressSummary(const std::string& label, uint64_t bytes, double seconds) {
  std::string out = absl::StrFormat("%s: %s in %.1f s", label, Bytes(bytes), seconds);
  if (seconds > 0) {
    out += " (" + Bytes(static_cast<uint64_t>(static_cast<double>(bytes) / seconds)) + "/s)";
  }
  return out;
}

Progress::Progress(std::string label, uint64_t total, std::ostream& out, bool tty, Now now)
    : label_(std::move(label)), total_(total), out_(&out), tty_(tty), now_(std::move(now)) {
  if (!now_) now_ = [] { return std::chrono::steady_clock::now(); };
  start_ = last_ = now_();
}

Progress Progress::ToStderr(std::string label, uint64_t total) {
  return Progress(std::move(label), total, std::cerr, ::isatty(STDERR_FILENO) == 1);
}

Progress::~Progress() {
  // A stream abandoned by an error path: end the live line so the error starts on its own.
  if (shown_ && !done_) *out_ << "\n" << std::flush;
}

double Progress::Seconds() const { return std::chrono::duration<double>(now_() - start_).count(); }

void Progress::Update(uint64_t bytes) {
  bytes_ = bytes;
  if (done_) return;
  const auto t = now_();
  if (tty_) {
    if (shown_ && t - last_ < kTtyEvery) return;
    *out_ << "\r" << FormatProgress(label_, bytes_, total_, Seconds()) << "\x1b[K" << std::flush;
    shown_ = true;
  } else {
    if (t - last_ < kPlainEvery) return;
    *out_ << FormatProgress(label_, bytes_, total_, Seconds()) << "\n" << std::flush;
  }
  last_ = t;
}

void Progress::Done(bool ok) {
  if (done_) return;
  done_ = true;
  if (tty_ && shown_) *out_ << "\r\x1b[K";
  if (ok) {
    *out_ << FormatProgressSummary(label_, bytes_, Seconds()) << "\n";
  } else if (tty_ && shown_) {
    *out_ << FormatProgress(label_, bytes_, total_, Seconds()) << " (failed)\n";
  }
  *out_ << std::flush;
}

}  // namespace steward
