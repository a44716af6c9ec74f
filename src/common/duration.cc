#include "common/duration.h"

#include <cctype>
#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace steward {

absl::StatusOr<std::chrono::milliseconds> ParseDuration(const std::string& text_in) {
  const std::string& text = text_in;
  if (text.empty()) return absl::InvalidArgumentError("empty duration");
  int64_t total_ms = 0;
  size_t i = 0;
  while (i < text.size()) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", text, "\" is not a duration (expected e.g. 500ms, 10s, 1m, 2h)"));
    }
    int64_t n = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      n = n * 10 + (text[i] - '0');
      if (n > 1'000'000'000)
        return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is too large"));
      ++i;
    }
    size_t unit_start = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
    std::string unit = text.substr(unit_start, i - unit_start);
    int64_t mult;
    if (unit == "ms") {
      mult = 1;
    } else if (unit == "s") {
      mult = 1000;
    } else if (unit == "m") {
      mult = 60'000;
    } else if (unit == "h") {
      mult = 3'600'000;
    } else if (unit == "d") {
      mult = 86'400'000;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", text, "\" has ",
                       unit.empty() ? "no unit" : absl::StrCat("unknown unit \"", unit, "\""),
                       " (use ms, s, m, h or d)"));
    }
    total_ms += n * mult;
  }
  return std::chrono::milliseconds(total_ms);
}

std::string FormatDuration(std::chrono::milliseconds d) {
  int64_t ms = d.count();
  if (ms != 0 && ms % 86'400'000 == 0) return absl::StrCat(ms / 86'400'000, "d");
  if (ms != 0 && ms % 3'600'000 == 0) return absl::StrCat(ms / 3'600'000, "h");
  if (ms != 0 && ms % 60'000 == 0) return absl::StrCat(ms / 60'000, "m");
  if (ms != 0 && ms % 1000 == 0) return absl::StrCat(ms / 1000, "s");
  return absl::StrCat(ms, "ms");
}

std::optional<std::pair<int, int>> ParseDailyWindow(const std::string& text) {
  const std::vector<std::string> parts = absl::StrSplit(text, '-');
  if (parts.size() != 2) return std::nullopt;
  auto minutes = [](const std::string& hm) -> std::optional<int> {
    const std::vector<std::string> p = absl::StrSplit(hm, ':');
    int h = 0, m = 0;
    if (p.size() != 2 || p[0].size() != 2 || p[1].size() != 2 || !absl::SimpleAtoi(p[0], &h) ||
        !absl::SimpleAtoi(p[1], &m) || h < 0 || h > 23 || m < 0 || m > 59) {
      return std::nullopt;
    }
    return h * 60 + m;
  };
  auto from = minutes(parts[0]), to = minutes(parts[1]);
  if (!from || !to || *from == *to) return std::nullopt;
  return std::make_pair(*from, *to);
}

std::string OutsideWindow(const std::string& window, int64_t unix_seconds) {
  if (window.empty()) return "";
  auto w = ParseDailyWindow(window);
  if (!w) return absl::StrCat("the window \"", window, "\" is not HH:MM-HH:MM");
  const int now = static_cast<int>((unix_seconds / 60) % (24 * 60));
  const auto [from, to] = *w;
  const bool inside = from < to ? (now >= from && now < to) : (now >= from || now < to);
  if (inside) return "";
  const int in = (from - now + 24 * 60) % (24 * 60);
  return absl::StrCat("outside the window ", window, " UTC, which opens in ", in / 60, "h", in % 60,
                      "m");
}

}  // namespace steward
