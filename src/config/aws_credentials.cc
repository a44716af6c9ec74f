#include "config/aws_credentials.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace steward {

absl::StatusOr<AwsCredentials> ParseSharedCredentials(const std::string& text,
                                                      const std::string& profile,
                                                      const std::string& path) {
  AwsCredentials c;
  bool in_profile = false, found = false;
  int line_no = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_no;
    absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[') {
      if (line.back() != ']') {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": line ", line_no, ": a section header without its ']'"));
      }
      const absl::string_view name = absl::StripAsciiWhitespace(line.substr(1, line.size() - 2));
      in_profile = name == profile;
      found = found || in_profile;
      continue;
    }
    if (!in_profile) continue;
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": line ", line_no, " of profile [",
                                                     profile, "] is not \"key = value\""));
    }
    const std::string key = absl::AsciiStrToLower(absl::StripAsciiWhitespace(line.substr(0, eq)));
    const std::string value(absl::StripAsciiWhitespace(line.substr(eq + 1)));
    if (key == "aws_access_key_id") c.access_key_id = value;
    if (key == "aws_secret_access_key") c.secret_access_key = value;
    if (key == "aws_session_token") c.session_token = value;
  }
  if (!found) {
    return absl::NotFoundError(absl::StrCat(path, " has no profile [", profile, "]"));
  }
  if (c.access_key_id.empty() || c.secret_access_key.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": profile [", profile, "] needs aws_access_key_id and aws_secret_access_key"));
  }
  return c;
}

std::string SharedCredentialsPath() {
  if (const char* f = std::getenv("AWS_SHARED_CREDENTIALS_FILE"); f != nullptr && *f != '\0') {
    return f;
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return absl::StrCat(home, "/.aws/credentials");
  }
  return "";
}

}  // namespace steward
