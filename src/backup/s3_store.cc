// S3Store: the BackupStore over the S3 REST API (AWS and S3-compatible servers), with libcurl for
// HTTP and sigv4.h for signing. Only what S3 requires is sent (no optional checksums, which some
// S3-compatible servers reject).
//
// Requests: every request is signed with a sha256 of its body (bodies are in memory, at most one
// part), so the server verifies what it stores. Each request is retried a few times with a short
// jittered backoff when it fails in a way worth retrying (network, timeout, 5xx, SlowDown);
// anything else is returned at once. A streamed GET that breaks midway resumes with a Range request
// pinned to the first response's ETag, so the sink never sees a byte twice or a mix of two
// versions.
//
// Uploads: an ObjectWriter buffers up to part_size; the first part that fills starts a multipart
// upload, so memory stays bounded by one part and an object smaller than a part is one PUT. An
// uncommitted writer aborts its upload when destroyed.
//
// Credentials never reach a message or a log: errors are built from S3's error code, and any text
// taken from a response is scrubbed of the configured key id, secret and token.
#include <tinyxml2.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "backup/curl_loader.h"
#include "backup/sigv4.h"
#include "backup/store.h"
#include "common/backoff.h"
#include "common/mutex.h"
#include "common/status.h"
#include "spdlog/spdlog.h"

namespace steward {
namespace {

// libcurl's entry points (loaded on first use, backup/curl_loader.h). Only called once a client's
// Init() has loaded them.
const CurlApi& Curl() { return **LoadCurl(); }

using Sink = std::function<absl::Status(std::string_view)>;

// Attempts per request: a blip (a dropped connection, one 503) is absorbed, a down server is
// reported within ~1.5 s of backoff plus the attempts themselves.
constexpr int kMaxAttempts = 4;
constexpr std::chrono::milliseconds kFirstRetryDelay{200};
constexpr std::chrono::milliseconds kMaxRetryDelay{2000};

// S3's multipart limits: parts of 5 MiB..5 GiB (the last may be smaller), at most 10000 parts.
constexpr uint64_t kMinPartSize = uint64_t{5} << 20;
constexpr uint64_t kMaxPartSize = uint64_t{5} << 30;
constexpr int kMaxParts = 10000;

// An error body is kept for its <Code>; anything past this is not worth the memory.
constexpr size_t kMaxErrorBody = 64 << 10;
constexpr long kMaxConnectSeconds = 10;
// Idle curl handles kept for reuse (each keeps its connection alive).
constexpr size_t kMaxIdleHandles = 8;

// ---- XML ---------------------------------------------------------------------------------------
// S3's responses are parsed with tinyxml2 (entities, CDATA, attributes and namespaces as XML
// says), whitespace kept as sent: a key may begin or end with spaces.

std::string XmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

// A parsed response body; ok() is false for a body that is not XML.
class XmlDoc {
 public:
  explicit XmlDoc(std::string_view body)
      : doc_(/*processEntities=*/true, tinyxml2::PRESERVE_WHITESPACE) {
    ok_ = doc_.Parse(body.data(), body.size()) == tinyxml2::XML_SUCCESS &&
          doc_.RootElement() != nullptr;
  }
  bool ok() const { return ok_; }
  std::string error() const { return ok_ ? "" : doc_.ErrorStr(); }
  const tinyxml2::XMLElement* root() const { return ok_ ? doc_.RootElement() : nullptr; }

 private:
  tinyxml2::XMLDocument doc_;
  bool ok_ = false;
};

// The text of `parent`'s first child element named `tag` ("" if none or empty).
std::string ChildText(const tinyxml2::XMLElement* parent, const char* tag) {
  if (parent == nullptr) return "";
  const tinyxml2::XMLElement* e = parent->FirstChildElement(tag);
  const char* text = e != nullptr ? e->GetText() : nullptr;
  return text != nullptr ? text : "";
}

// The text of the root's child `tag` in `body` ("" if the body is not XML or has none): the
// fields of an error (<Error><Code>…) or of a small answer (<InitiateMultipartUploadResult>…).
std::string XmlText(std::string_view body, const char* tag) {
  XmlDoc doc(body);
  return ChildText(doc.root(), tag);
}

// ---- HTTP -------------------------------------------------------------------------------------

struct Endpoint {
  std::string scheme;     // "http" or "https"
  std::string host;       // "host" or "host:port", as sent in the Host header
  std::string base_path;  // "" or "/something" when the server lives under a path
};

absl::StatusOr<Endpoint> ParseEndpoint(std::string_view url) {
  Endpoint e;
  size_t sep = url.find("://");
  if (sep == std::string_view::npos) {
    e.scheme = "https";
  } else {
    e.scheme = std::string(url.substr(0, sep));
    url.remove_prefix(sep + 3);
  }
  if (e.scheme != "http" && e.scheme != "https") {
    return absl::InvalidArgumentError(
        absl::StrCat("S3 endpoint: unsupported scheme \"", e.scheme, "\" (use http or https)"));
  }
  size_t slash = url.find('/');
  e.host = std::string(url.substr(0, slash));
  if (slash != std::string_view::npos) {
    std::string_view path = url.substr(slash);
    while (!path.empty() && path.back() == '/') path.remove_suffix(1);
    e.base_path = std::string(path);
  }
  if (e.host.empty() || e.host.find_first_of("?#@ ") != std::string::npos) {
    return absl::InvalidArgumentError("S3 endpoint: expected scheme://host[:port][/path]");
  }
  return e;
}

struct HttpRequest {
  std::string method;
  std::string key;  // the full object key (with the store's prefix); "" addresses the bucket
  sigv4::Params query;
  sigv4::Params headers;  // extra headers; every header we set is signed
  std::string_view body;
};

struct HttpResponse {
  long status = 0;
  std::string body;  // the whole body, except a 2xx body that went to a sink
  std::string etag;
  std::string request_id;
  std::optional<uint64_t> content_length;
};

// One attempt's state, shared with curl's callbacks.
struct Transfer {
  CURL* curl = nullptr;
  std::string_view upload;
  size_t upload_pos = 0;
  const Sink* sink = nullptr;
  // A resumed read: bytes already delivered. A 206 answer starts there; a server that ignores
  // Range answers 200 from byte 0, and that many bytes are skipped.
  uint64_t resume_from = 0;
  std::optional<uint64_t> skip;  // decided at the first body byte
  uint64_t delivered = 0;        // bytes passed to the sink in this attempt
  absl::Status sink_status;
  HttpResponse* response = nullptr;
};

size_t OnBody(char* data, size_t size, size_t n, void* arg) {
  auto* t = static_cast<Transfer*>(arg);
  const size_t len = size * n;
  long code = 0;
  Curl().easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
  if (t->sink == nullptr || code / 100 != 2) {
    if (t->sink == nullptr || t->response->body.size() < kMaxErrorBody) {
      t->response->body.append(data, len);
    }
    return len;
  }
  if (!t->skip) t->skip = code == 206 ? 0 : t->resume_from;
  std::string_view chunk(data, len);
  const uint64_t k = std::min<uint64_t>(*t->skip, chunk.size());
  chunk.remove_prefix(k);
  *t->skip -= k;
  if (chunk.empty()) return len;
  absl::Status s = (*t->sink)(chunk);
  if (!s.ok()) {
    t->sink_status = std::move(s);
    return 0;  // not `len`: curl stops with CURLE_WRITE_ERROR
  }
  t->delivered += chunk.size();
  return len;
}

size_t OnHeader(char* data, size_t size, size_t n, void* arg) {
  auto* r = static_cast<HttpResponse*>(arg);
  const size_t len = size * n;
  std::string_view line(data, len);
  if (line.rfind("HTTP/", 0) == 0) {  // a new response (e.g. after a 100 Continue)
    r->etag.clear();
    r->request_id.clear();
    r->content_length.reset();
    return len;
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return len;
  std::string name(line.substr(0, colon));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) {
    value.remove_suffix(1);
  }
  if (name == "etag") {
    r->etag = std::string(value);
  } else if (name == "x-amz-request-id") {
    r->request_id = std::string(value);
  } else if (name == "content-length") {
    uint64_t v = 0;
    if (absl::SimpleAtoi(std::string(value), &v)) r->content_length = v;
  }
  return len;
}

size_t OnUpload(char* buffer, size_t size, size_t n, void* arg) {
  auto* t = static_cast<Transfer*>(arg);
  const size_t len = std::min(size * n, t->upload.size() - t->upload_pos);
  std::memcpy(buffer, t->upload.data() + t->upload_pos, len);
  t->upload_pos += len;
  return len;
}

// curl rewinds the body when it resends a request on a fresh connection (a reused keep-alive
// connection that the server had closed).
int OnSeek(void* arg, curl_off_t offset, int origin) {
  auto* t = static_cast<Transfer*>(arg);
  if (origin != SEEK_SET || offset < 0 || static_cast<uint64_t>(offset) > t->upload.size()) {
    return CURL_SEEKFUNC_FAIL;
  }
  t->upload_pos = static_cast<size_t>(offset);
  return CURL_SEEKFUNC_OK;
}

struct SlistDeleter {
  void operator()(curl_slist* l) const { Curl().slist_free_all(l); }
};

// ---- the client -----------------------------------------------------------------------------

std::string Trim(std::string s, char c) {
  while (!s.empty() && s.front() == c) s.erase(s.begin());
  while (!s.empty() && s.back() == c) s.pop_back();
  return s;
}

// The connection to one bucket: configuration, signing, retries and a pool of curl handles. Shared
// by a store and its writers, so a writer stays valid even if it outlives its store. Thread-safe:
// everything but the handle pool is immutable after construction.
class S3Client {
 public:
  explicit S3Client(const S3Options& options) : options_(options) {
    options_.prefix = Trim(options_.prefix, '/');
    if (options_.part_size == 0) options_.part_size = S3Options().part_size;
    if (options_.region.empty()) options_.region = "us-east-1";
    endpoint_url_ = options_.endpoint.empty()
                        ? absl::StrCat("https://s3.", options_.region, ".amazonaws.com")
                        : options_.endpoint;
    init_ = Init();
  }

  ~S3Client() {
    for (CURL* h : idle_) Curl().easy_cleanup(h);
  }

  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  const S3Options& options() const { return options_; }
  const absl::Status& init_status() const { return init_; }

  std::string Describe() const {
    std::string d = absl::StrCat("s3://", options_.bucket, "/", options_.prefix, " (endpoint ",
                                 endpoint_url_, ", region ", options_.region);
    if (options_.path_style) d += ", path-style";
    return d + ")";
  }

  std::string FullKey(const std::string& key) const {
    return options_.prefix.empty() ? key : absl::StrCat(options_.prefix, "/", key);
  }

  // Sends `req`, retrying what is worth retrying. A 2xx body streams to `sink` when given. The
  // response is returned only for a 2xx status; everything else is an error status with a message
  // that says what to do (and no credential).
  absl::StatusOr<HttpResponse> Send(const HttpRequest& req, const Sink* sink = nullptr) {
    if (!init_.ok()) return init_;
    Backoff backoff(kFirstRetryDelay, kMaxRetryDelay);
    uint64_t delivered = 0;  // bytes of the body already passed to `sink`, over all attempts
    std::string read_etag;   // the version being read, pinned once bytes have been delivered
    for (int attempt = 1;; ++attempt) {
      Attempt a = Perform(req, sink, delivered, read_etag);
      if (sink != nullptr && a.response.status / 100 == 2 && read_etag.empty()) {
        read_etag = a.response.etag;
      }
      const bool resumed = delivered > 0;
      delivered += a.delivered;
      if (a.sink_failed) return a.transport;  // the caller's own error, never retried
      absl::Status s = a.transport;
      if (s.ok()) {
        if (a.response.status / 100 == 2 && !RootIsError(a.response.body)) return a.response;
        // Every byte arrived before the connection broke: the resumed range is empty.
        if (resumed && a.response.status == 416) return a.response;
        s = ErrorFor(req, a.response);
        if (resumed && a.response.status == 412) {
          s = absl::AbortedError(absl::StrCat("\"", req.key, "\" changed while it was read"));
        }
      }
      if (s.code() != absl::StatusCode::kUnavailable || attempt >= kMaxAttempts) {
        if (attempt > 1) s = Annotate(s, absl::StrCat("after ", attempt, " attempts"));
        return s;
      }
      const auto delay = backoff.Next();
      spdlog::warn("s3 {} \"{}\": attempt {}/{} failed ({}); retrying in {} ms", req.method,
                   req.key, attempt, kMaxAttempts, Msg(s), delay.count());
      std::this_thread::sleep_for(delay);
    }
  }

 private:
  absl::Status Init() {
    if (options_.bucket.empty() || options_.bucket.find('/') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("S3 bucket name \"", options_.bucket, "\" is empty or has a '/'"));
    }
    if (options_.access_key_id.empty() || options_.secret_access_key.empty()) {
      return absl::FailedPreconditionError(
          "S3 credentials are not configured (access key id and secret access key)");
    }
    if (options_.part_size < kMinPartSize || options_.part_size > kMaxPartSize) {
      return absl::InvalidArgumentError(absl::StrCat("S3 part_size ", options_.part_size,
                                                     " is outside S3's limits (5 MiB to 5 GiB)"));
    }
    auto e = ParseEndpoint(endpoint_url_);
    if (!e.ok()) return e.status();
    endpoint_ = *e;
    // Every curl call below comes after this (requests check init_ first).
    return LoadCurl().status();
  }

  std::string HostFor() const {
    return options_.path_style ? endpoint_.host
                               : absl::StrCat(options_.bucket, ".", endpoint_.host);
  }

  // The encoded path, sent and signed as is.
  std::string PathFor(const std::string& key) const {
    std::string path = endpoint_.base_path;
    if (options_.path_style) absl::StrAppend(&path, "/", sigv4::UriEncode(options_.bucket, true));
    if (!key.empty() || !options_.path_style) {
      absl::StrAppend(&path, "/", sigv4::UriEncode(key, false));
    }
    return path;
  }

  // Scrubs anything credential-like from text that came from outside (a server's message).
  std::string Redact(std::string s) const {
    for (const std::string* secret :
         {&options_.secret_access_key, &options_.session_token, &options_.access_key_id}) {
      // A credential shorter than this is a test fixture, and replacing it would garble text.
      if (secret->size() >= 4) absl::StrReplaceAll({{*secret, "<redacted>"}}, &s);
    }
    return s;
  }

  // CompleteMultipartUpload can answer 200 and still fail: the body is then an <Error>.
  static bool RootIsError(std::string_view body) {
    size_t at = 0;
    while ((at = body.find('<', at)) != std::string_view::npos) {
      if (body.substr(at, 2) != "<?") return body.substr(at, 7) == "<Error>";
      ++at;
    }
    return false;
  }

  absl::Status ErrorFor(const HttpRequest& req, const HttpResponse& r) const {
    const std::string code = XmlText(r.body, "Code");
    const std::string server_message = Redact(XmlText(r.body, "Message"));
    std::string detail = absl::StrCat("HTTP ", r.status);
    if (!code.empty()) absl::StrAppend(&detail, " ", code);
    if (!server_message.empty()) absl::StrAppend(&detail, ": ", server_message);
    if (!r.request_id.empty()) absl::StrAppend(&detail, " (request id ", r.request_id, ")");
    const std::string bucket = absl::StrCat("bucket \"", options_.bucket, "\"");

    if (code == "NoSuchBucket") {
      return absl::FailedPreconditionError(
          absl::StrCat(bucket, " does not exist at ", endpoint_url_,
                       ": create it or correct the bucket name (NoSuchBucket)"));
    }
    if (code == "NoSuchKey" || (r.status == 404 && code.empty() && !req.key.empty())) {
      return absl::NotFoundError(absl::StrCat("no object \"", req.key, "\" in ", bucket));
    }
    if (code == "NoSuchUpload") {
      return absl::AbortedError(absl::StrCat("the multipart upload of \"", req.key,
                                             "\" no longer exists (NoSuchUpload)"));
    }
    if (code == "InvalidAccessKeyId") {
      return absl::PermissionDeniedError(
          "the S3 server does not know the configured access key id (InvalidAccessKeyId): "
          "check the credentials");
    }
    if (code == "SignatureDoesNotMatch") {
      return absl::PermissionDeniedError(
          "the S3 server rejected the request signature (SignatureDoesNotMatch): the secret "
          "access key does not belong to the access key id, or the region is wrong");
    }
    if (code == "ExpiredToken" || code == "InvalidToken" || code == "TokenRefreshRequired") {
      return absl::PermissionDeniedError(absl::StrCat("the session token was refused (", code,
                                                      "): renew the temporary credentials"));
    }
    if (code == "AccessDenied" || code == "AllAccessDisabled" || code == "AccountProblem") {
      return absl::PermissionDeniedError(absl::StrCat(
          "the credentials may not ", req.method, " in ", bucket, " (", code,
          "): grant the access key s3:GetObject, s3:PutObject, s3:DeleteObject, s3:ListBucket "
          "and s3:AbortMultipartUpload; ",
          detail));
    }
    if (code == "RequestTimeTooSkewed") {
      return absl::FailedPreconditionError(
          "this machine's clock is too far from the S3 server's (RequestTimeTooSkewed): "
          "synchronize the clock");
    }
    if (code == "AuthorizationHeaderMalformed" || code == "PermanentRedirect" ||
        code == "IllegalLocationConstraintException" || r.status == 301) {
      std::string where = XmlText(r.body, "Region");
      if (where.empty()) where = XmlText(r.body, "Endpoint");
      return absl::FailedPreconditionError(absl::StrCat(
          bucket, " is not served with region ", options_.region, " at ", endpoint_url_,
          where.empty() ? "" : absl::StrCat(" (the server points to ", where, ")"),
          ": set the bucket's region and endpoint; ", detail));
    }
    if (r.status >= 500 || r.status == 429 || code == "SlowDown" || code == "RequestTimeout" ||
        code == "InternalError" || r.status / 100 == 2) {
      return absl::UnavailableError(absl::StrCat("S3 server error: ", detail));
    }
    if (r.status == 403)
      return absl::PermissionDeniedError(absl::StrCat("access denied: ", detail));
    if (r.status == 404) return absl::NotFoundError(absl::StrCat("not found: ", detail));
    return absl::FailedPreconditionError(absl::StrCat("S3 refused the request: ", detail));
  }

  CURL* Acquire() {
    {
      MutexLock lock(&mu_);
      if (!idle_.empty()) {
        CURL* h = idle_.back();
        idle_.pop_back();
        return h;
      }
    }
    return Curl().easy_init();
  }

  void Release(CURL* h) {
    Curl().easy_reset(h);  // keeps the connection and DNS caches
    MutexLock lock(&mu_);
    if (idle_.size() < kMaxIdleHandles) {
      idle_.push_back(h);
      return;
    }
    Curl().easy_cleanup(h);
  }

  struct Attempt {
    // Non-OK: no complete HTTP response (network, timeout, or the sink's own error).
    absl::Status transport;
    bool sink_failed = false;
    uint64_t delivered = 0;  // bytes this attempt passed to the sink
    HttpResponse response;   // whatever status came back
  };

  // One attempt. `resume_from` > 0 continues a read that broke after that many bytes, pinned to
  // the version `if_match`.
  Attempt Perform(const HttpRequest& req, const Sink* sink, uint64_t resume_from,
                  const std::string& if_match) {
    Attempt a;
    HttpResponse* response = &a.response;
    const std::string host = HostFor();
    const std::string path = PathFor(req.key);
    const std::string query = sigv4::CanonicalQuery(req.query);
    const std::string url =
        absl::StrCat(endpoint_.scheme, "://", host, path, query.empty() ? "" : "?", query);
    const std::string amz_date = sigv4::AmzDate(std::chrono::system_clock::now());

    sigv4::Request sr;
    sr.method = req.method;
    sr.path = path;
    sr.query = req.query;
    sr.payload_hash = sigv4::Sha256Hex(req.body);
    sr.headers = {
        {"Host", host}, {"x-amz-content-sha256", sr.payload_hash}, {"x-amz-date", amz_date}};
    if (!options_.session_token.empty()) {
      sr.headers.emplace_back("x-amz-security-token", options_.session_token);
    }
    for (const auto& h : req.headers) sr.headers.push_back(h);
    if (resume_from > 0) {
      sr.headers.emplace_back("Range", absl::StrCat("bytes=", resume_from, "-"));
      if (!if_match.empty()) sr.headers.emplace_back("If-Match", if_match);
    }
    const sigv4::Signed sig = sigv4::Sign(
        sr, {options_.access_key_id, options_.secret_access_key, options_.session_token},
        options_.region, "s3", amz_date);

    curl_slist* raw = nullptr;
    for (const auto& [name, value] : sr.headers) {
      raw = Curl().slist_append(raw, absl::StrCat(name, ": ", value).c_str());
    }
    raw = Curl().slist_append(raw, absl::StrCat("Authorization: ", sig.authorization).c_str());
    // No "Expect: 100-continue": curl would wait up to a second on every part for a server that
    // does not answer it, and some S3-compatible proxies mishandle it.
    raw = Curl().slist_append(raw, "Expect:");
    std::unique_ptr<curl_slist, SlistDeleter> headers(raw);

    CURL* h = Acquire();
    if (h == nullptr) {
      a.transport = absl::ResourceExhaustedError("curl_easy_init failed");
      return a;
    }
    Transfer t;
    t.curl = h;
    t.upload = req.body;
    t.sink = sink;
    t.resume_from = resume_from;
    t.response = response;
    char error[CURL_ERROR_SIZE] = {0};

    Curl().easy_setopt(h, CURLOPT_URL, url.c_str());
    Curl().easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());
    Curl().easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    // What we signed is what we send: no "/../" squashing.
    Curl().easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
    Curl().easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    Curl().easy_setopt(h, CURLOPT_USERAGENT, "etcd-steward/" STEWARD_VERSION);
    Curl().easy_setopt(h, CURLOPT_ERRORBUFFER, error);
    const long timeout = std::max(1, options_.timeout_seconds);
    // Connecting takes milliseconds when the server is there; a short bound keeps four attempts
    // at a black-holed endpoint from taking minutes.
    Curl().easy_setopt(h, CURLOPT_CONNECTTIMEOUT, std::min(timeout, kMaxConnectSeconds));
    Curl().easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    Curl().easy_setopt(h, CURLOPT_LOW_SPEED_TIME, timeout);
    Curl().easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    if (!options_.ca_file.empty()) Curl().easy_setopt(h, CURLOPT_CAINFO, options_.ca_file.c_str());
    Curl().easy_setopt(h, CURLOPT_WRITEFUNCTION, OnBody);
    Curl().easy_setopt(h, CURLOPT_WRITEDATA, &t);
    Curl().easy_setopt(h, CURLOPT_HEADERFUNCTION, OnHeader);
    Curl().easy_setopt(h, CURLOPT_HEADERDATA, response);
    if (req.method == "GET") {
      Curl().easy_setopt(h, CURLOPT_HTTPGET, 1L);
    } else if (req.method == "HEAD") {
      Curl().easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (req.method == "PUT" || req.method == "POST") {
      // An upload of a known size; CUSTOMREQUEST turns the PUT into a POST where needed.
      Curl().easy_setopt(h, CURLOPT_UPLOAD, 1L);
      Curl().easy_setopt(h, CURLOPT_CUSTOMREQUEST, req.method.c_str());
      Curl().easy_setopt(h, CURLOPT_READFUNCTION, OnUpload);
      Curl().easy_setopt(h, CURLOPT_READDATA, &t);
      Curl().easy_setopt(h, CURLOPT_SEEKFUNCTION, OnSeek);
      Curl().easy_setopt(h, CURLOPT_SEEKDATA, &t);
      Curl().easy_setopt(h, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
    } else {
      Curl().easy_setopt(h, CURLOPT_CUSTOMREQUEST, req.method.c_str());
    }

    const CURLcode rc = Curl().easy_perform(h);
    Curl().easy_getinfo(h, CURLINFO_RESPONSE_CODE, &response->status);
    Release(h);
    a.delivered = t.delivered;
    if (rc == CURLE_OK) return a;
    if (rc == CURLE_WRITE_ERROR && !t.sink_status.ok()) {
      a.sink_failed = true;
      a.transport = t.sink_status;
      return a;
    }
    const std::string what =
        Redact(absl::StrCat(Curl().easy_strerror(rc), error[0] ? ": " : "", error));
    switch (rc) {
      case CURLE_UNSUPPORTED_PROTOCOL:
      case CURLE_URL_MALFORMAT:
        a.transport =
            absl::InvalidArgumentError(absl::StrCat("S3 endpoint ", endpoint_url_, ": ", what));
        break;
      case CURLE_PEER_FAILED_VERIFICATION:
      case CURLE_SSL_CACERT_BADFILE:
      case CURLE_SSL_CERTPROBLEM:
        a.transport = absl::FailedPreconditionError(
            absl::StrCat("TLS verification of the S3 endpoint ", endpoint_url_, " failed: ", what));
        break;
      default:
        a.transport = absl::UnavailableError(
            absl::StrCat("network error with the S3 endpoint ", endpoint_url_, ": ", what));
    }
    return a;
  }

  S3Options options_;
  std::string endpoint_url_;
  Endpoint endpoint_;
  absl::Status init_;
  Mutex mu_;
  std::vector<CURL*> idle_ ABSL_GUARDED_BY(mu_);
};

// ---- the writer -------------------------------------------------------------------------------

// A single PUT of a whole object.
absl::Status PutObject(S3Client& client, const std::string& full_key, std::string_view body) {
  HttpRequest req{"PUT", full_key, {}, {{"Content-Type", "application/octet-stream"}}, body};
  return client.Send(req).status();
}

class S3Writer final : public ObjectWriter {
 public:
  S3Writer(std::shared_ptr<S3Client> client, std::string key)
      : client_(std::move(client)),
        key_(std::move(key)),
        part_size_(client_->options().part_size) {}

  ~S3Writer() override {
    if (upload_id_.empty() || committed_) return;
    // Best effort: a failure leaves an incomplete upload, invisible but billed until a bucket
    // lifecycle rule (AbortIncompleteMultipartUpload) removes it.
    HttpRequest req{"DELETE", key_, {{"uploadId", upload_id_}}, {}, {}};
    auto r = client_->Send(req);
    if (!r.ok() && r.status().code() != absl::StatusCode::kAborted) {
      spdlog::warn("s3: could not abort the unfinished upload of \"{}\": {}", key_,
                   Msg(r.status()));
    }
  }

  absl::Status Write(std::string_view chunk) override {
    if (committed_) return absl::FailedPreconditionError("Write after Commit");
    if (!status_.ok()) return status_;
    while (!chunk.empty()) {
      // A full buffer is sent only once more data arrives, so an object of exactly one part is
      // still a single PUT.
      if (buffer_.size() == part_size_) {
        status_ = FlushPart();
        if (!status_.ok()) return status_;
      }
      const size_t n = std::min<size_t>(chunk.size(), part_size_ - buffer_.size());
      if (buffer_.size() + n > buffer_.capacity()) {
        // vector::reserve allocates exactly this much: the buffer never exceeds one part.
        buffer_.reserve(
            std::min<size_t>(part_size_, std::max(buffer_.capacity() * 2, buffer_.size() + n)));
      }
      buffer_.insert(buffer_.end(), chunk.begin(), chunk.begin() + n);
      chunk.remove_prefix(n);
      total_ += n;
    }
    return absl::OkStatus();
  }

  absl::Status Commit() override {
    if (committed_) return absl::FailedPreconditionError("Commit called twice");
    if (!status_.ok()) return status_;
    if (upload_id_.empty()) {
      status_ = PutObject(*client_, key_, std::string_view(buffer_.data(), buffer_.size()));
    } else {
      if (!buffer_.empty()) status_ = FlushPart();
      if (status_.ok()) status_ = Complete();
    }
    if (!status_.ok()) return status_;
    committed_ = true;
    buffer_ = {};
    return absl::OkStatus();
  }

 private:
  absl::Status FlushPart() {
    if (upload_id_.empty()) {
      HttpRequest create{
          "POST", key_, {{"uploads", ""}}, {{"Content-Type", "application/octet-stream"}}, {}};
      auto r = client_->Send(create);
      if (!r.ok()) return Annotate(r.status(), "starting a multipart upload");
      upload_id_ = XmlText(r->body, "UploadId");
      if (upload_id_.empty()) {
        return absl::InternalError("CreateMultipartUpload answered without an UploadId");
      }
    }
    const int part = static_cast<int>(etags_.size()) + 1;
    if (part > kMaxParts) {
      return absl::OutOfRangeError(absl::StrCat("object exceeds S3's ", kMaxParts, " parts of ",
                                                part_size_, " bytes: raise part_size"));
    }
    HttpRequest req{"PUT",
                    key_,
                    {{"partNumber", std::to_string(part)}, {"uploadId", upload_id_}},
                    {},
                    std::string_view(buffer_.data(), buffer_.size())};
    auto r = client_->Send(req);
    if (!r.ok()) return Annotate(r.status(), absl::StrCat("uploading part ", part));
    if (r->etag.empty()) {
      return absl::InternalError(absl::StrCat("UploadPart ", part, " answered without an ETag"));
    }
    etags_.push_back(r->etag);
    buffer_.clear();
    return absl::OkStatus();
  }

  absl::Status Complete() {
    std::string xml = "<CompleteMultipartUpload>";
    for (size_t i = 0; i < etags_.size(); ++i) {
      absl::StrAppend(&xml, "<Part><PartNumber>", i + 1, "</PartNumber><ETag>",
                      XmlEscape(etags_[i]), "</ETag></Part>");
    }
    xml += "</CompleteMultipartUpload>";
    HttpRequest req{
        "POST", key_, {{"uploadId", upload_id_}}, {{"Content-Type", "application/xml"}}, xml};
    auto r = client_->Send(req);
    if (r.ok()) return absl::OkStatus();
    if (r.status().code() == absl::StatusCode::kAborted) {
      // A retried Complete whose first attempt succeeded but lost its answer finds the upload
      // gone. Keys are never reused for different content, so the object at the key with our
      // size is ours.
      HttpRequest head{"HEAD", key_, {}, {}, {}};
      auto h = client_->Send(head);
      if (h.ok() && h->content_length == total_) return absl::OkStatus();
    }
    return Annotate(r.status(), "completing the multipart upload");
  }

  std::shared_ptr<S3Client> client_;
  const std::string key_;  // full key
  const uint64_t part_size_;
  std::vector<char> buffer_;  // at most part_size_ bytes
  uint64_t total_ = 0;
  std::string upload_id_;
  std::vector<std::string> etags_;  // of parts 1..n
  absl::Status status_;             // the first failure; the writer is unusable after it
  bool committed_ = false;
};

// ---- the store --------------------------------------------------------------------------------

class S3Store final : public BackupStore {
 public:
  explicit S3Store(const S3Options& options) : client_(std::make_shared<S3Client>(options)) {}

  std::string Describe() const override { return client_->Describe(); }

  absl::StatusOr<std::unique_ptr<ObjectWriter>> Create(const std::string& key) override {
    if (absl::Status s = Check(key); !s.ok()) return s;
    return std::unique_ptr<ObjectWriter>(new S3Writer(client_, client_->FullKey(key)));
  }

  absl::Status Put(const std::string& key, const std::string& content) override {
    if (absl::Status s = Check(key); !s.ok()) return s;
    absl::Status s;
    if (content.size() <= client_->options().part_size) {
      s = PutObject(*client_, client_->FullKey(key), content);
    } else {
      S3Writer w(client_, client_->FullKey(key));
      s = w.Write(content);
      if (s.ok()) s = w.Commit();
    }
    return Annotate(s, absl::StrCat("s3 put \"", key, "\""));
  }

  absl::StatusOr<std::string> Get(const std::string& key) override {
    std::string out;
    absl::Status s = Read(key, [&out](std::string_view chunk) {
      out.append(chunk);
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
    return out;
  }

  absl::Status Read(const std::string& key,
                    const std::function<absl::Status(std::string_view)>& sink) override {
    if (absl::Status s = Check(key); !s.ok()) return s;
    HttpRequest req{"GET", client_->FullKey(key), {}, {}, {}};
    return Annotate(client_->Send(req, &sink).status(), absl::StrCat("s3 get \"", key, "\""));
  }

  absl::StatusOr<std::vector<ObjectInfo>> List(const std::string& prefix) override {
    const std::string& root = client_->options().prefix;
    const std::string strip = root.empty() ? "" : root + "/";
    const std::string full = strip + prefix;
    std::vector<ObjectInfo> out;
    std::string token;
    std::set<std::string> seen_tokens;
    while (true) {
      HttpRequest req{"GET", "", {{"list-type", "2"}}, {}, {}};
      if (!full.empty()) req.query.emplace_back("prefix", full);
      if (!token.empty()) req.query.emplace_back("continuation-token", token);
      auto r = client_->Send(req);
      if (!r.ok()) return Annotate(r.status(), absl::StrCat("s3 list \"", prefix, "\""));
      XmlDoc doc(r->body);
      if (!doc.ok()) {
        return absl::InternalError(
            absl::StrCat("s3 list \"", prefix, "\": the response is not XML: ", doc.error()));
      }
      for (const tinyxml2::XMLElement* contents = doc.root()->FirstChildElement("Contents");
           contents != nullptr; contents = contents->NextSiblingElement("Contents")) {
        ObjectInfo info;
        info.key = ChildText(contents, "Key");
        if (info.key.rfind(strip, 0) != 0) continue;  // cannot happen with a prefix query
        info.key.erase(0, strip.size());
        if (!absl::SimpleAtoi(ChildText(contents, "Size"), &info.size)) {
          return absl::InternalError(
              absl::StrCat("s3 list \"", prefix, "\": no size for \"", info.key, "\""));
        }
        out.push_back(std::move(info));
      }
      if (ChildText(doc.root(), "IsTruncated") != "true") break;
      token = ChildText(doc.root(), "NextContinuationToken");
      if (token.empty() || !seen_tokens.insert(token).second) {
        return absl::InternalError(absl::StrCat(
            "s3 list \"", prefix, "\": a truncated page without a new continuation token"));
      }
    }
    std::sort(out.begin(), out.end(),
              [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
    return out;
  }

  absl::Status Delete(const std::string& key) override {
    if (absl::Status s = Check(key); !s.ok()) return s;
    HttpRequest req{"DELETE", client_->FullKey(key), {}, {}, {}};
    absl::Status s = client_->Send(req).status();
    if (s.code() == absl::StatusCode::kNotFound) return absl::OkStatus();
    return Annotate(s, absl::StrCat("s3 delete \"", key, "\""));
  }

 private:
  absl::Status Check(const std::string& key) const {
    if (!client_->init_status().ok()) return client_->init_status();
    if (key.empty()) return absl::InvalidArgumentError("empty object key");
    return absl::OkStatus();
  }

  std::shared_ptr<S3Client> client_;
};

}  // namespace

std::unique_ptr<BackupStore> NewS3Store(const S3Options& options) {
  return std::make_unique<S3Store>(options);
}

}  // namespace steward
