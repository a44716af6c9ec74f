// AWS Signature Version 4 for HTTP requests signed in the Authorization header, as S3 and every
// other AWS service accept it. Pure functions (OpenSSL's SHA-256/HMAC, no I/O and no clock), so the
// exact canonical request, string to sign and signature can be checked against AWS's published test
// vectors (tests/unit/sigv4_test.cc).
//
// We sign ourselves instead of using libcurl's CURLOPT_AWS_SIGV4: libcurl 7.88 neither sorts nor
// encodes the query, does not add x-amz-content-sha256 and signs headers we cannot see, so the
// request on the wire would only be right if every caller worked around those gaps. Here the caller
// sends exactly what it signed: the same encoded path, CanonicalQuery() as the query string, and
// the same header values.
//
// Secrets: the secret access key only ever feeds the HMAC key derivation. No function returns it,
// and Signed holds nothing secret (the Authorization value names the access key id, as every
// request must; it is a header, not something to log).
//
// Thread-safe: no shared state.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace steward::sigv4 {

// Hex sha256 of the empty string: the payload hash of a request without a body.
inline constexpr char kEmptyPayloadSha256[] =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
// The payload hash S3 accepts when the body is not hashed (streamed bodies).
inline constexpr char kUnsignedPayload[] = "UNSIGNED-PAYLOAD";

struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // optional; the caller sends and signs it as x-amz-security-token
};

using Params = std::vector<std::pair<std::string, std::string>>;

// What is signed. The signer adds no header: `headers` must already hold every header to be signed,
// including "host" and "x-amz-date" (and, for S3, "x-amz-content-sha256" and, with temporary
// credentials, "x-amz-security-token").
struct Request {
  std::string method;  // "GET", "PUT", ...
  // The canonical URI exactly as sent, already URI-encoded (see UriEncode). S3's rules apply: the
  // path is neither normalized nor encoded a second time.
  std::string path = "/";
  Params query;    // decoded names and values, in any order; a valueless parameter has value ""
  Params headers;  // names in any case and order; values as sent
  std::string payload_hash = kEmptyPayloadSha256;  // hex sha256 of the body, or kUnsignedPayload
};

struct Signed {
  std::string canonical_request;
  std::string string_to_sign;
  std::string signature;       // lowercase hex
  std::string signed_headers;  // "host;x-amz-date"
  std::string authorization;   // the Authorization header's value
};

// Signs `request` for `region`/`service` at `amz_date` ("YYYYMMDDTHHMMSSZ", UTC).
// REQUIRES: amz_date equals the request's x-amz-date header (the caller sends that header).
Signed Sign(const Request& request, const Credentials& credentials, std::string_view region,
            std::string_view service, std::string_view amz_date);

// AWS's URI encoding: every byte except A-Z a-z 0-9 - _ . ~ becomes %XX (uppercase hex); '/' is
// kept unless `encode_slash`. Use encode_slash=false for an S3 object key in the path and true for
// query names and values.
std::string UriEncode(std::string_view s, bool encode_slash);

// Names and values encoded, sorted by name then value, joined as "a=1&b=&c=3". The query string to
// send is this same string, so what is signed is what the server parses.
std::string CanonicalQuery(const Params& query);

// "YYYYMMDDTHHMMSSZ" for `t` in UTC.
std::string AmzDate(std::chrono::system_clock::time_point t);

std::string Sha256Hex(std::string_view data);

}  // namespace steward::sigv4
