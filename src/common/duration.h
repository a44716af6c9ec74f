// Parsing and printing of human durations as written in the config ("500ms", "10s", "1m", "2h").
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"

namespace steward {

// Accepts a non-negative integer followed by one unit: ms, s, m, h (e.g. "1m", "250ms").
// Compound forms ("1m30s") are accepted too. Returns InvalidArgument naming the problem.
absl::StatusOr<std::chrono::milliseconds> ParseDuration(const std::string& text_in);

// The shortest exact form: 90000ms -> "90s", 60000ms -> "1m", 1500ms -> "1500ms".
std::string FormatDuration(std::chrono::milliseconds d);

// A daily window, "02:00-05:00" (UTC, may wrap past midnight): minutes of the day [from, to).
// nullopt if the text is not such a window.
std::optional<std::pair<int, int>> ParseDailyWindow(const std::string& text);
// "" when `unix_seconds` is inside `window` (or the window is empty), else "outside the window
// 02:00-05:00 UTC, which opens in 3h12m".
std::string OutsideWindow(const std::string& window, int64_t unix_seconds);

}  // namespace steward
