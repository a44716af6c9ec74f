// Progress of a long byte stream (a snapshot, a backup, an export, an import) for stewardctl.
//
// On a terminal: one line rewritten in place (bytes, rate, and with a known total the percentage
// and ETA), at most every 200 ms, and a summary line at the end. Elsewhere (a pipe, a log, a
// test): a plain line at most every 5 s, and the summary line. Progress goes to stderr so that
// stdout stays the command's result (a name, or JSON).
//
// Not thread-safe: one stream, one Progress, updated from the thread that reads the stream.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

namespace steward {

// "12.3 MB / 40.0 MB (30%)  85.1 MB/s  ETA 0:03", or without a total "12.3 MB  85.1 MB/s" (the
// decimal units of HumanBytes, as list-backups and status print sizes).
// The rate and ETA are left out until `seconds` is positive. Pure.
std::string FormatProgress(const std::string& label, uint64_t bytes, uint64_t total,
                           double seconds);
// "40.0 MB in 0.5 s (80.0 MB/s)". Pure.
std::string FormatProgressSummary(const std::string& label, uint64_t bytes, double seconds);

class Progress {
 public:
  using Now = std::function<std::chrono::steady_clock::time_point()>;
  // `total` 0: unknown (no percentage, no ETA). `now` is injectable for tests.
  Progress(std::string label, uint64_t total, std::ostream& out, bool tty, Now now = {});
  // To stderr, as a terminal if stderr is one.
  static Progress ToStderr(std::string label, uint64_t total);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  Progress(Progress&&) = default;

  // `bytes` so far (not an increment).
  void Update(uint64_t bytes);
  void SetTotal(uint64_t total) { total_ = total; }
  // Writes the summary line once; later calls do nothing. `ok` false: the stream failed, and the
  // live line (if any) is only ended.
  void Done(bool ok = true);
  // Update as a callback, for the pipeline's hooks.
  std::function<void(uint64_t)> Callback() {
    return [this](uint64_t b) { Update(b); };
  }

 private:
  double Seconds() const;
  std::string label_;
  uint64_t total_;
  std::ostream* out_;
  bool tty_;
  Now now_;
  std::chrono::steady_clock::time_point start_, last_;
  uint64_t bytes_ = 0;
  bool shown_ = false;  // a live line is on the terminal
  bool done_ = false;
};

}  // namespace steward
