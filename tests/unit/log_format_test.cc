// The agent's log lines (common/log_format.h): UTC with the zone whatever TZ says, and JSON
// lines that stay one valid object whatever the message holds.
#include "common/log_format.h"

#include <gtest/gtest.h>
#include <time.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "spdlog/logger.h"
#include "spdlog/sinks/ostream_sink.h"

namespace steward {
namespace {

using std::chrono::milliseconds;
using std::chrono::system_clock;

// 2026-11-26T15:04:05.123Z
const system_clock::time_point kWhen{milliseconds(1795705445123)};

// Sets TZ for one test: a zone 5:30 east of UTC (POSIX form, no tzdata needed).
class ForeignZone {
 public:
  ForeignZone() {
    if (const char* old = std::getenv("TZ"); old != nullptr) old_ = old;
    ::setenv("TZ", "TEST-5:30", 1);
    ::tzset();
  }
  ~ForeignZone() {
    if (old_.has_value()) {
      ::setenv("TZ", old_->c_str(), 1);
    } else {
      ::unsetenv("TZ");
    }
    ::tzset();
  }

 private:
  std::optional<std::string> old_;
};

std::string Json(std::string_view s) {
  std::string out;
  AppendJsonString(s, &out);
  return out;
}

std::string Format(const spdlog::formatter& prototype, spdlog::level::level_enum level,
                   std::string_view msg, system_clock::time_point when = kWhen) {
  auto f = prototype.clone();
  spdlog::details::log_msg m(when, spdlog::source_loc{}, "steward", level,
                             spdlog::string_view_t(msg.data(), msg.size()));
  spdlog::memory_buf_t buf;
  f->format(m, buf);
  return std::string(buf.data(), buf.size());
}

TEST(LogFormatTest, ParsesTheTwoNamesAndNamesThemOnError) {
  EXPECT_EQ(*ParseLogFormat("text"), LogFormat::kText);
  EXPECT_EQ(*ParseLogFormat("json"), LogFormat::kJson);
  auto bad = ParseLogFormat("JSON");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "log format \"JSON\" is not one of text, json");
}

TEST(LogFormatTest, TimestampIsUtcWithMillisecondsAndZone) {
  ForeignZone zone;
  EXPECT_EQ(FormatUtcTimestamp(kWhen), "2026-11-26T15:04:05.123Z");
  EXPECT_EQ(FormatUtcTimestamp(system_clock::time_point{}), "1970-01-01T00:00:00.000Z");
  // Before the epoch the milliseconds still count up within their second.
  EXPECT_EQ(FormatUtcTimestamp(system_clock::time_point{milliseconds(-1)}),
            "1969-12-31T23:59:59.999Z");
}

TEST(LogFormatTest, JsonStringEscapesQuotesBackslashesAndControls) {
  EXPECT_EQ(Json("plain"), "\"plain\"");
  EXPECT_EQ(Json("say \"hi\""), R"("say \"hi\"")");
  EXPECT_EQ(Json("C:\\dir"), R"("C:\\dir")");
  EXPECT_EQ(Json("a\nb\rc\td\be\ff"), R"("a\nb\rc\td\be\ff")");
  EXPECT_EQ(Json(std::string_view("nul\0x", 5)), R"("nul\u0000x")");
  EXPECT_EQ(Json("\x01\x1f\x7f"), R"("\u0001\u001f\u007f")");
  EXPECT_EQ(Json("</script>"), "\"</script>\"") << "nothing else is escaped";
}

TEST(LogFormatTest, JsonStringKeepsUtf8AndReplacesWhatIsNot) {
  EXPECT_EQ(Json("é € 😀"), "\"é € 😀\"");
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(Json("a\xff!"), "\"a" + fffd + "!\"") << "a byte that starts nothing";
  EXPECT_EQ(Json("\xe2\x82"), "\"" + fffd + fffd + "\"") << "a truncated sequence";
  EXPECT_EQ(Json("\xc0\xaf"), "\"" + fffd + fffd + "\"") << "an overlong '/'";
  EXPECT_EQ(Json("\xed\xa0\x80"), "\"" + fffd + fffd + fffd + "\"") << "a surrogate";
  EXPECT_EQ(Json("\xf4\x90\x80\x80"), "\"" + fffd + fffd + fffd + fffd + "\"") << "past U+10FFFF";
  // Whatever the bytes, a JSON parser takes the result back.
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  EXPECT_TRUE(nlohmann::json::accept(Json(all)));
}

TEST(LogFormatTest, JsonLineHasTheFourFieldsAndIsOneLine) {
  ForeignZone zone;
  auto f = MakeLogFormatter(LogFormat::kJson, "n1");
  const std::string line = Format(*f, spdlog::level::warn, "etcd said \"no\"\nand stopped");
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1) << line;
  EXPECT_EQ(line,
            "{\"ts\":\"2026-11-26T15:04:05.123Z\",\"level\":\"warning\",\"node\":\"n1\","
            "\"msg\":\"etcd said \\\"no\\\"\\nand stopped\"}\n");
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j.size(), 4u);
  EXPECT_EQ(j["ts"], "2026-11-26T15:04:05.123Z");
  EXPECT_EQ(j["level"], "warning");
  EXPECT_EQ(j["node"], "n1");
  EXPECT_EQ(j["msg"], "etcd said \"no\"\nand stopped");
}

TEST(LogFormatTest, JsonBeforeTheConfigHasAnEmptyNode) {
  auto f = MakeLogFormatter(LogFormat::kJson, "");
  const auto j = nlohmann::json::parse(Format(*f, spdlog::level::critical, "config error: x"));
  EXPECT_EQ(j["node"], "");
  EXPECT_EQ(j["level"], "critical");
}

TEST(LogFormatTest, TextLineIsUtcWithTheZoneWhateverTz) {
  ForeignZone zone;
  auto f = MakeLogFormatter(LogFormat::kText, "n1");
  EXPECT_EQ(Format(*f, spdlog::level::info, "started etcd"),
            "2026-11-26T15:04:05.123Z [info] [n1] started etcd\n");
  auto early = MakeLogFormatter(LogFormat::kText, "");
  EXPECT_EQ(Format(*early, spdlog::level::err, "config error"),
            "2026-11-26T15:04:05.123Z [error] config error\n");
}

TEST(LogFormatTest, ALoggerWithTheJsonFormatterWritesOneObjectPerCall) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  spdlog::logger logger("test", sink);
  logger.set_formatter(MakeLogFormatter(LogFormat::kJson, "n2"));
  logger.info("member {} joined", "n3");
  logger.error("multi\nline\t\"quoted\"");
  logger.flush();
  std::istringstream lines(out.str());
  std::string line;
  std::vector<nlohmann::json> got;
  while (std::getline(lines, line)) got.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(got.size(), 2u) << out.str();
  EXPECT_EQ(got[0]["msg"], "member n3 joined");
  EXPECT_EQ(got[0]["level"], "info");
  EXPECT_EQ(got[1]["msg"], "multi\nline\t\"quoted\"");
  EXPECT_EQ(got[1]["node"], "n2");
  EXPECT_EQ(got[1]["ts"].get<std::string>().back(), 'Z');
}

}  // namespace
}  // namespace steward
