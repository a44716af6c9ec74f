// How the agent's own log lines look: text for people, JSON for log shippers. Both carry the
// time in UTC with its zone ("2026-11-26T15:04:05.123Z"), whatever TZ the machine has, so the
// lines of agents on several hosts sort and compare as they are.
//
//   text: 2026-11-26T15:04:05.123Z [info] [n1] started etcd
//   json: {"ts":"2026-11-26T15:04:05.123Z","level":"info","node":"n1","msg":"started etcd"}
//
// A JSON line is one object whatever the message holds: quotes, backslashes and control
// characters (newlines included) are escaped, and bytes that are not UTF-8 become U+FFFD, so a
// shipper never sees a broken or a split record. Level names are spdlog's (trace, debug, info,
// warning, error, critical), the same in both formats.
//
// Thread-safety: the functions are pure; a formatter is used by one sink, which serializes its
// calls (spdlog's contract for formatters).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "spdlog/formatter.h"

namespace steward {

enum class LogFormat { kText, kJson };

// "text" or "json"; InvalidArgument otherwise (naming both choices).
absl::StatusOr<LogFormat> ParseLogFormat(std::string_view name);

// RFC 3339 in UTC with milliseconds and the zone: "2026-11-26T15:04:05.123Z".
std::string FormatUtcTimestamp(std::chrono::system_clock::time_point t);

// Appends `s` to `out` as a JSON string, quotes included.
void AppendJsonString(std::string_view s, std::string* out);

// A formatter for the agent's logger. `node` is the node's name; empty before the config is
// read (then a JSON line says "node":"", so every line has the same four keys, and a text line
// has no "[node]").
std::unique_ptr<spdlog::formatter> MakeLogFormatter(LogFormat format, const std::string& node);

}  // namespace steward
