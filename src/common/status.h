// Status helpers shared by every module.
#pragma once

#include <chrono>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "fmt/format.h"

// Debian's abseil has its own string_view type (not std::string_view); let fmt/spdlog print it
// so `spdlog::info("...: {}", status.message())` works.
template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<fmt::string_view> {
  auto format(absl::string_view s, fmt::format_context& ctx) const {
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(s.data(), s.size()), ctx);
  }
};

namespace steward {

// The message of `s` as a std::string.
inline std::string Msg(const absl::Status& s) { return std::string(s.message()); }

// `s` with "context: " prepended to its message, keeping the code.
inline absl::Status Annotate(const absl::Status& s, const std::string& context) {
  if (s.ok()) return s;
  return absl::Status(s.code(), context + ": " + std::string(s.message()));
}

// Says `msg` through `log`, but the same message at most once a minute: for loops that wait on
// a condition and would otherwise repeat themselves every pass. Not thread-safe.
class RepeatFilter {
 public:
  template <typename Log>
  void Say(const std::string& msg, Log log) {
    Say(msg, std::chrono::steady_clock::now(), log);
  }
  // The same on a given clock's time (the simulation's virtual time).
  template <typename Log>
  void Say(const std::string& msg, std::chrono::steady_clock::time_point now, Log log) {
    if (msg != last_ || now - last_at_ > std::chrono::minutes(1)) {
      log(msg);
      last_ = msg;
      last_at_ = now;
    }
  }

 private:
  std::string last_;
  std::chrono::steady_clock::time_point last_at_;
};

}  // namespace steward
