#include "common/log_format.h"

#include <time.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "spdlog/pattern_formatter.h"

namespace steward {
namespace {

// One JSON object per line: {"ts":…,"level":…,"node":…,"msg":…}.
class JsonFormatter : public spdlog::formatter {
 public:
  explicit JsonFormatter(std::string node) : node_(std::move(node)) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const spdlog::string_view_t level = spdlog::level::to_string_view(msg.level);
    std::string line;
    line.reserve(msg.payload.size() + node_.size() + 80);
    line += "{\"ts\":\"";
    line += FormatUtcTimestamp(msg.time);
    line += "\",\"level\":";
    AppendJsonString(std::string_view(level.data(), level.size()), &line);
    line += ",\"node\":";
    AppendJsonString(node_, &line);
    line += ",\"msg\":";
    AppendJsonString(std::string_view(msg.payload.data(), msg.payload.size()), &line);
    line += "}\n";
    dest.append(line.data(), line.data() + line.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>(node_);
  }

 private:
  const std::string node_;
};

// The length of the well-formed UTF-8 sequence at the start of `s` (2 to 4 bytes), or 0 if
// it is not one: a stray continuation byte, a truncated sequence, an overlong form, a
// surrogate or a code point past U+10FFFF.
size_t Utf8SequenceLength(std::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(0);
  size_t len = 0;
  uint32_t cp = 0;
  uint32_t min = 0;
  if ((lead & 0xE0) == 0xC0) {
    len = 2;
    cp = lead & 0x1F;
    min = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    len = 3;
    cp = lead & 0x0F;
    min = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    len = 4;
    cp = lead & 0x07;
    min = 0x10000;
  } else {
    return 0;
  }
  if (s.size() < len) return 0;
  for (size_t i = 1; i < len; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

// JSON's two-character escape for `c`, or nullptr if it has none.
const char* ShortEscape(unsigned char c) {
  switch (c) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    case '\b':
      return "\\b";
    case '\f':
      return "\\f";
    default:
      return nullptr;
  }
}

}  // namespace

absl::StatusOr<LogFormat> ParseLogFormat(std::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(
      absl::StrCat("log format \"", std::string(name), "\" is not one of text, json"));
}

std::string FormatUtcTimestamp(std::chrono::system_clock::time_point t) {
  using namespace std::chrono;
  const auto ms = floor<milliseconds>(t.time_since_epoch());
  const auto secs = floor<seconds>(ms);
  const time_t tt = static_cast<time_t>(secs.count());
  struct tm tm {};
  ::gmtime_r(&tt, &tm);
  return absl::StrFormat("%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                         tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                         static_cast<int>((ms - secs).count()));
}

void AppendJsonString(std::string_view s, std::string* out) {
  static const char kHex[] = "0123456789abcdef";
  out->push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      if (const size_t len = Utf8SequenceLength(s.substr(i)); len > 0) {
        out->append(s.data() + i, len);
        i += len;
      } else {
        out->append("\xEF\xBF\xBD");  // U+FFFD, one per byte that is not UTF-8
        ++i;
      }
      continue;
    }
    if (const char* e = ShortEscape(c); e != nullptr) {
      out->append(e);
    } else if (c < 0x20 || c == 0x7F) {
      out->append("\\u00");
      out->push_back(kHex[c >> 4]);
      out->push_back(kHex[c & 0xF]);
    } else {
      out->push_back(static_cast<char>(c));
    }
    ++i;
  }
  out->push_back('"');
}

std::unique_ptr<spdlog::formatter> MakeLogFormatter(LogFormat format, const std::string& node) {
  if (format == LogFormat::kJson) return std::make_unique<JsonFormatter>(node);
  // %e is the milliseconds; the colour range (%^ %$) shows only on a terminal. A node name
  // is [A-Za-z0-9._-] (config checks it), but a '%' would still be taken literally.
  const std::string where =
      node.empty() ? "" : absl::StrCat("[", absl::StrReplaceAll(node, {{"%", "%%"}}), "] ");
  return std::make_unique<spdlog::pattern_formatter>(
      absl::StrCat("%Y-%m-%dT%H:%M:%S.%eZ [%^%l%$] ", where, "%v"), spdlog::pattern_time_type::utc);
}

}  // namespace steward
