// The AWS shared credentials file (~/.aws/credentials, or $AWS_SHARED_CREDENTIALS_FILE), as the
// AWS CLI and SDKs write it: INI sections named by profile, each with aws_access_key_id,
// aws_secret_access_key and optionally aws_session_token. The S3 store takes credentials from
// it when neither the config nor the AWS_* variables give them (backup.s3.profile, else
// $AWS_PROFILE, else "default"). Pure parsing plus one path lookup; no secret is ever put into
// an error message.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace steward {

struct AwsCredentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
};

// The profile's credentials in `text` (the file's content; `path` only names it in messages).
// NotFound if the profile has no section; InvalidArgument if it lacks a key or a line is not
// "key = value".
absl::StatusOr<AwsCredentials> ParseSharedCredentials(const std::string& text,
                                                      const std::string& profile,
                                                      const std::string& path);

// $AWS_SHARED_CREDENTIALS_FILE, else $HOME/.aws/credentials ("" without either).
std::string SharedCredentialsPath();

}  // namespace steward
