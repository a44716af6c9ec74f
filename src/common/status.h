// Status helpers shared by every module.
#pragma once

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

}  // namespace steward
