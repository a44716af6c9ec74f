// S3Store against a real S3 server (s3rver). Each test uses its own key prefix in one bucket.
// Skipped, with a message, when s3rver is not installed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "backup/store.h"
#include "common/status.h"
#include "gtest/gtest.h"
#include "harness.h"
#include "pki/pki.h"
#include "s3rver.h"

namespace steward {
namespace {

using testing::S3rver;

constexpr char kBucket[] = "steward-test";
constexpr uint64_t kMiB = 1 << 20;

// Incremental sha256, to compare 40 MiB without holding it twice.
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr); }
  ~Sha256() { EVP_MD_CTX_free(ctx_); }
  void Update(std::string_view d) { EVP_DigestUpdate(ctx_, d.data(), d.size()); }
  std::string Hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx_, md, &n);
    std::string out;
    for (unsigned int i = 0; i < n; ++i) absl::StrAppend(&out, absl::Hex(md[i], absl::kZeroPad2));
    return out;
  }

 private:
  EVP_MD_CTX* ctx_;
};

bool Has(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

std::string RandomBytes(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(rng());
  return s;
}

class S3StoreTest : public ::testing::Test {
 protected:
  // One server per test process (ctest runs each test in its own process).
  static void SetUpTestSuite() {
    if (S3rver::Binary().empty()) return;
    auto s = S3rver::Start({kBucket});
    if (s.ok()) {
      server_ = s->release();
    } else {
      start_error_ = new std::string(std::string(s.status().message()));
    }
  }

  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete start_error_;
    start_error_ = nullptr;
  }

  void SetUp() override {
    if (S3rver::Binary().empty()) {
      // `make test` installs it; a missing server is a broken setup, not a reason to pass.
      GTEST_FAIL() << "s3rver is not installed: run `npm ci --prefix tests/s3rver` (or set "
                      "S3RVER_BIN) to run the S3 tests";
    }
    ASSERT_NE(server_, nullptr) << "s3rver did not start: " << (start_error_ ? *start_error_ : "");
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    prefix_ = absl::StrCat("it/", info->name());
  }

  void TearDown() override {
    if (HasFailure() && server_ != nullptr) {
      std::cerr << "s3rver log tail:\n" << server_->LogTail() << "\n";
    }
  }

  S3Options Options() const {
    S3Options o;
    o.bucket = kBucket;
    o.prefix = prefix_;
    o.endpoint = server_->Endpoint();
    o.path_style = true;
    o.access_key_id = S3rver::kAccessKey;
    o.secret_access_key = S3rver::kSecretKey;
    o.part_size = 5 * kMiB;
    o.timeout_seconds = 20;
    return o;
  }

  std::unique_ptr<BackupStore> Store() const { return NewS3Store(Options()); }

  static S3rver* server_;
  static std::string* start_error_;
  std::string prefix_;
};

S3rver* S3StoreTest::server_ = nullptr;
std::string* S3StoreTest::start_error_ = nullptr;

TEST_F(S3StoreTest, PutGetOverwriteDelete) {
  auto store = Store();
  EXPECT_TRUE(Has(store->Describe(), absl::StrCat("s3://", kBucket, "/", prefix_)))
      << store->Describe();
  ASSERT_TRUE(store->Put("a/meta.json", "{\"v\":1}").ok());
  auto got = store->Get("a/meta.json");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "{\"v\":1}");

  ASSERT_TRUE(store->Put("a/meta.json", "second").ok());
  EXPECT_EQ(*store->Get("a/meta.json"), "second");

  ASSERT_TRUE(store->Put("a/empty", "").ok());
  EXPECT_EQ(*store->Get("a/empty"), "");

  ASSERT_TRUE(store->Delete("a/meta.json").ok());
  EXPECT_EQ(store->Get("a/meta.json").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(store->Delete("a/meta.json").ok()) << "deleting a missing object is OK";
}

TEST_F(S3StoreTest, MissingObjectIsNotFound) {
  auto store = Store();
  auto got = store->Get("no/such/key");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound) << got.status();
  EXPECT_TRUE(Has(Msg(got.status()), "no/such/key")) << got.status();
  absl::Status read = store->Read("no/such/key", [](std::string_view) {
    ADD_FAILURE() << "the sink must not see an error body";
    return absl::OkStatus();
  });
  EXPECT_EQ(read.code(), absl::StatusCode::kNotFound) << read;
}

TEST_F(S3StoreTest, ListReturnsEveryPageSorted) {
  // More than one page (S3 and s3rver answer at most 1000 keys per page); written by several
  // threads through one store, which must be thread-safe.
  constexpr int kObjects = 1100;
  auto store = Store();
  std::atomic<int> next{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = next++; i < kObjects; i = next++) {
        // Sizes vary so a size mix-up shows.
        if (!store->Put(absl::StrCat("many/", i), std::string(static_cast<size_t>(i % 7), 'x'))
                 .ok()) {
          ++failures;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(failures.load(), 0);
  ASSERT_TRUE(store->Put("other/x", "y").ok());

  auto list = store->List("many/");
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), static_cast<size_t>(kObjects));
  std::vector<std::string> expected;
  for (int i = 0; i < kObjects; ++i) expected.push_back(absl::StrCat("many/", i));
  std::sort(expected.begin(), expected.end());
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ((*list)[i].key, expected[i]) << "at " << i;
    const int n = std::stoi(expected[i].substr(5));
    EXPECT_EQ((*list)[i].size, static_cast<uint64_t>(n % 7)) << expected[i];
  }

  auto all = store->List("");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), static_cast<size_t>(kObjects + 1));
  EXPECT_EQ(all->back().key, "other/x");

  auto none = store->List("nothing-here/");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
}

TEST_F(S3StoreTest, StreamingMultipartUpload) {
  // ~40 MiB in odd-sized chunks with 5 MiB parts: eight full parts and a short last one.
  constexpr uint64_t kTotal = 40 * kMiB + 12345;
  auto store = Store();
  auto writer = store->Create("big/snapshot.db.zst");
  ASSERT_TRUE(writer.ok()) << writer.status();
  std::mt19937_64 rng(42);
  Sha256 sent;
  uint64_t written = 0;
  while (written < kTotal) {
    const size_t n = std::min<uint64_t>(kTotal - written, 1 * kMiB + 4093);
    const std::string chunk = RandomBytes(rng, n);
    sent.Update(chunk);
    ASSERT_TRUE((*writer)->Write(chunk).ok());
    written += n;
  }
  // Parts are uploaded, but nothing is visible before Commit.
  auto before = store->List("big/");
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_TRUE(before->empty());
  EXPECT_EQ(
      store->Read("big/snapshot.db.zst", [](std::string_view) { return absl::OkStatus(); }).code(),
      absl::StatusCode::kNotFound);

  absl::Status commit = (*writer)->Commit();
  ASSERT_TRUE(commit.ok()) << commit;
  EXPECT_EQ((*writer)->Commit().code(), absl::StatusCode::kFailedPrecondition);
  writer->reset();  // destroying a committed writer must not abort anything

  auto list = store->List("big/");
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].key, "big/snapshot.db.zst");
  EXPECT_EQ((*list)[0].size, kTotal);

  Sha256 received;
  uint64_t read = 0;
  absl::Status s = store->Read("big/snapshot.db.zst", [&](std::string_view chunk) {
    received.Update(chunk);
    read += chunk.size();
    return absl::OkStatus();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(read, kTotal);
  EXPECT_EQ(received.Hex(), sent.Hex());
}

TEST_F(S3StoreTest, SmallWriterIsOnePutAtCommit) {
  auto store = Store();
  auto writer = store->Create("small/meta.json");
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->Write("{\"a\":").ok());
  ASSERT_TRUE((*writer)->Write("").ok());
  ASSERT_TRUE((*writer)->Write("1}").ok());
  EXPECT_EQ(store->Get("small/meta.json").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE((*writer)->Commit().ok());
  EXPECT_EQ(*store->Get("small/meta.json"), "{\"a\":1}");

  // Exactly one part is still a single PUT (the boundary case of the part logic), and an empty
  // writer makes an empty object.
  std::mt19937_64 rng(7);
  const std::string part = RandomBytes(rng, 5 * kMiB);
  auto one = store->Create("small/one-part");
  ASSERT_TRUE((*one)->Write(part).ok());
  ASSERT_TRUE((*one)->Commit().ok());
  EXPECT_EQ(*store->Get("small/one-part"), part);

  auto empty = store->Create("small/empty");
  ASSERT_TRUE((*empty)->Commit().ok());
  EXPECT_EQ(*store->Get("small/empty"), "");
}

TEST_F(S3StoreTest, AbandonedWriterLeavesNothing) {
  auto store = Store();
  {
    auto writer = store->Create("abandoned/snapshot");
    ASSERT_TRUE(writer.ok());
    std::mt19937_64 rng(1);
    // More than one part: the multipart upload has started and part 1 is stored.
    ASSERT_TRUE((*writer)->Write(RandomBytes(rng, 6 * kMiB)).ok());
  }  // destroyed without Commit: aborts the upload
  EXPECT_EQ(store->Get("abandoned/snapshot").status().code(), absl::StatusCode::kNotFound);
  auto list = store->List("abandoned/");
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
}

TEST_F(S3StoreTest, PutLargerThanAPartUsesMultipart) {
  auto store = Store();
  std::mt19937_64 rng(3);
  const std::string content = RandomBytes(rng, 11 * kMiB + 1);
  ASSERT_TRUE(store->Put("put/large", content).ok());
  auto got = store->Get("put/large");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(*got == content);
}

TEST_F(S3StoreTest, KeysThatNeedEscaping) {
  // Encoded in the URL path, and entity-encoded in the listing's XML.
  auto store = Store();
  const std::vector<std::string> keys = {"odd/a&b",       "odd/<tag>",
                                         "odd/quote\"'s", "odd/space and+plus",
                                         "odd/pct%20",    "odd/\xC3\xBC=utf8"};
  for (const auto& k : keys) {
    absl::Status s = store->Put(k, k);
    ASSERT_TRUE(s.ok()) << k << ": " << s;
  }
  for (const auto& k : keys) {
    auto got = store->Get(k);
    ASSERT_TRUE(got.ok()) << k << ": " << got.status();
    EXPECT_EQ(*got, k);
  }
  auto list = store->List("odd/");
  ASSERT_TRUE(list.ok()) << list.status();
  std::vector<std::string> listed;
  for (const auto& o : *list) listed.push_back(o.key);
  std::vector<std::string> expected = keys;
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(listed, expected);
}

TEST_F(S3StoreTest, PrefixesSeparateStores) {
  S3Options a = Options();
  a.prefix = prefix_ + "/tenant-a/";  // slashes around a prefix are tolerated
  S3Options b = Options();
  b.prefix = prefix_ + "/tenant-b";
  auto store_a = NewS3Store(a);
  auto store_b = NewS3Store(b);
  ASSERT_TRUE(store_a->Put("k", "from a").ok());
  ASSERT_TRUE(store_b->Put("k", "from b").ok());
  EXPECT_EQ(*store_a->Get("k"), "from a");
  EXPECT_EQ(*store_b->Get("k"), "from b");
  auto list = store_a->List("");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].key, "k");
  // The root store sees both, under their prefixes.
  auto root = Store()->List("");
  ASSERT_TRUE(root.ok());
  ASSERT_EQ(root->size(), 2u);
  EXPECT_EQ((*root)[0].key, "tenant-a/k");
}

TEST_F(S3StoreTest, VirtualHostedStyle) {
  S3Options o = Options();
  o.endpoint = server_->VhostEndpoint();
  o.path_style = false;
  auto store = NewS3Store(o);
  ASSERT_TRUE(store->Put("vhost/x", "virtual").ok());
  auto got = store->Get("vhost/x");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "virtual");
  auto list = store->List("vhost/");
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 1u);
  // The same object through path-style addressing: the bucket really was the one in the host.
  EXPECT_EQ(*Store()->Get("vhost/x"), "virtual");
}

TEST_F(S3StoreTest, SinkErrorStopsTheRead) {
  auto store = Store();
  std::mt19937_64 rng(5);
  ASSERT_TRUE(store->Put("sink/x", RandomBytes(rng, 3 * kMiB)).ok());
  int calls = 0;
  absl::Status s = store->Read("sink/x", [&](std::string_view) {
    ++calls;
    return absl::UnavailableError("disk full");  // Unavailable: must still not be retried
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(Has(Msg(s), "disk full")) << s;
  EXPECT_EQ(calls, 1);
}

TEST_F(S3StoreTest, MissingBucketSaysSo) {
  S3Options o = Options();
  o.bucket = "no-such-bucket";
  auto store = NewS3Store(o);
  absl::Status put = store->Put("x", "y");
  EXPECT_EQ(put.code(), absl::StatusCode::kFailedPrecondition) << put;
  EXPECT_TRUE(Has(Msg(put), "bucket \"no-such-bucket\" does not exist")) << put;
  auto list = store->List("");
  EXPECT_EQ(list.status().code(), absl::StatusCode::kFailedPrecondition) << list.status();
  auto get = store->Get("x");
  EXPECT_EQ(get.status().code(), absl::StatusCode::kFailedPrecondition) << get.status();
  auto writer = store->Create("big");
  ASSERT_TRUE(writer.ok());
  EXPECT_EQ((*writer)->Commit().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(S3StoreTest, UnknownAccessKeyIsPermissionDeniedWithoutCredentials) {
  S3Options o = Options();
  o.access_key_id = "AKIAWRONGKEY0000001";
  o.secret_access_key = "very-secret-value/do-not-print";
  o.session_token = "session-token-do-not-print";
  auto store = NewS3Store(o);
  std::vector<absl::Status> errors = {store->Put("x", "y"), store->Get("x").status(),
                                      store->List("").status(), store->Delete("x")};
  for (const absl::Status& s : errors) {
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
    EXPECT_TRUE(Has(Msg(s), "access key id")) << s;
    EXPECT_TRUE(Has(Msg(s), "InvalidAccessKeyId")) << s;
    EXPECT_FALSE(Has(Msg(s), o.access_key_id)) << s;
    EXPECT_FALSE(Has(Msg(s), o.secret_access_key)) << s;
    EXPECT_FALSE(Has(Msg(s), o.session_token)) << s;
  }
}

TEST_F(S3StoreTest, UnreachableEndpointIsUnavailableAfterBoundedRetries) {
  // A port bound but not listening: connection refused on every attempt, and nobody else can
  // take the port meanwhile.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  S3Options o = Options();
  o.endpoint = absl::StrCat("http://127.0.0.1:", ntohs(addr.sin_port));
  auto store = NewS3Store(o);
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = store->Put("x", "y");
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_TRUE(Has(Msg(s), "attempts")) << s;
  EXPECT_LT(took, std::chrono::seconds(10));
  close(fd);
}

TEST_F(S3StoreTest, BadOptionsFailEveryCall) {
  S3Options o = Options();
  o.part_size = 1 * kMiB;  // below S3's 5 MiB minimum
  auto store = NewS3Store(o);
  EXPECT_EQ(store->Put("x", "y").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Create("x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Put("", "y").code(), absl::StatusCode::kInvalidArgument);
}

// ---- faults, from a scripted server -----------------------------------------------------------
// s3rver never fails, so retries, resumed reads and S3's 200-with-an-error answers are checked
// against a server that plays back canned responses, one per connection.

class ScriptedServer {
 public:
  // Answers the i-th request with responses[i] (raw HTTP) and closes the connection; requests
  // past the script get a 500.
  explicit ScriptedServer(std::vector<std::string> responses) : responses_(std::move(responses)) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    listen(fd_, 16);
    thread_ = std::thread([this] { Run(); });
  }

  ~ScriptedServer() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    thread_.join();
    close(fd_);
  }

  std::string Endpoint() const { return absl::StrCat("http://127.0.0.1:", port_); }

  // The head (request line and headers) of each request received so far.
  std::vector<std::string> Requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  void Run() {
    for (size_t i = 0; !stop_; ++i) {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string data;
      char buf[65536];
      size_t head_end = std::string::npos;
      uint64_t body_size = 0;
      while (true) {
        if (head_end == std::string::npos) {
          head_end = data.find("\r\n\r\n");
          if (head_end != std::string::npos) {
            std::string lower = data.substr(0, head_end);
            for (char& ch : lower)
              ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
            const size_t cl = lower.find("content-length:");
            if (cl != std::string::npos) body_size = std::stoull(lower.substr(cl + 15));
          }
        }
        if (head_end != std::string::npos && data.size() >= head_end + 4 + body_size) break;
        const ssize_t n = read(c, buf, sizeof(buf));
        if (n <= 0) break;
        data.append(buf, static_cast<size_t>(n));
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(data.substr(0, head_end));
      }
      const std::string response =
          i < responses_.size() ? responses_[i]
                                : "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n";
      size_t off = 0;
      while (off < response.size()) {
        const ssize_t n = write(c, response.data() + off, response.size() - off);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
      }
      close(c);
    }
  }

  const std::vector<std::string> responses_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> requests_;
};

std::string Response(int status, const std::string& reason, const std::string& body,
                     const std::string& extra_headers = "") {
  return absl::StrCat("HTTP/1.1 ", status, " ", reason, "\r\nConnection: close\r\n", extra_headers,
                      "Content-Length: ", body.size(), "\r\n\r\n", body);
}

std::string ErrorXml(const std::string& code) {
  return absl::StrCat("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>", code,
                      "</Code><Message>scripted</Message></Error>");
}

S3Options ScriptedOptions(const ScriptedServer& server) {
  S3Options o;
  o.bucket = "b";
  o.endpoint = server.Endpoint();
  o.path_style = true;
  o.access_key_id = "AKIAFAULTTEST000";
  o.secret_access_key = "fault-test-secret";
  o.part_size = 5 * kMiB;
  o.timeout_seconds = 10;
  return o;
}

TEST(S3StoreFaultTest, RetriesServerErrorsThenSucceeds) {
  ScriptedServer server({Response(503, "Slow Down", ErrorXml("SlowDown")),
                         Response(500, "Internal Server Error", ErrorXml("InternalError")),
                         Response(200, "OK", "")});
  absl::Status s = NewS3Store(ScriptedOptions(server))->Put("k", "y");
  EXPECT_TRUE(s.ok()) << s;
  const auto requests = server.Requests();
  ASSERT_EQ(requests.size(), 3u);
  for (const auto& r : requests) {
    EXPECT_TRUE(Has(r, "PUT /b/k HTTP/1.1")) << r;
    // The body's sha256 is sent (and signed), as S3 requires.
    EXPECT_TRUE(Has(
        r,
        "x-amz-content-sha256: a1fce4363854ff888cff4b8e7875d600c2682390412a8cf79b37d0b11148b0fa"))
        << r;
    EXPECT_TRUE(Has(r, "Authorization: AWS4-HMAC-SHA256 Credential=AKIAFAULTTEST000/")) << r;
    EXPECT_FALSE(Has(r, "Expect:")) << r;
  }
}

TEST(S3StoreFaultTest, GivesUpAfterBoundedAttempts) {
  std::vector<std::string> script(10, Response(503, "Slow Down", ErrorXml("SlowDown")));
  ScriptedServer server(script);
  absl::Status s = NewS3Store(ScriptedOptions(server))->Put("k", "y");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_TRUE(Has(Msg(s), "SlowDown")) << s;
  EXPECT_EQ(server.Requests().size(), 4u);
}

TEST(S3StoreFaultTest, DoesNotRetryWhatAnOperatorMustFix) {
  ScriptedServer server({Response(403, "Forbidden", ErrorXml("AccessDenied")),
                         Response(403, "Forbidden", ErrorXml("SignatureDoesNotMatch")),
                         Response(404, "Not Found", ErrorXml("NoSuchBucket"))});
  const S3Options o = ScriptedOptions(server);
  auto store = NewS3Store(o);
  absl::Status denied = store->Put("k", "y");
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied) << denied;
  EXPECT_TRUE(Has(Msg(denied), "AccessDenied")) << denied;
  absl::Status signature = store->Put("k", "y");
  EXPECT_EQ(signature.code(), absl::StatusCode::kPermissionDenied) << signature;
  EXPECT_TRUE(Has(Msg(signature), "secret access key")) << signature;
  absl::Status bucket = store->Delete("k");
  EXPECT_EQ(bucket.code(), absl::StatusCode::kFailedPrecondition) << bucket;
  EXPECT_EQ(server.Requests().size(), 3u) << "one request each: none retried";
  for (const absl::Status& s : {denied, signature, bucket}) {
    EXPECT_FALSE(Has(Msg(s), o.access_key_id)) << s;
    EXPECT_FALSE(Has(Msg(s), o.secret_access_key)) << s;
  }
}

// The listing is parsed as XML (tinyxml2): entities and CDATA decode as XML says, whitespace in
// keys is kept, and a body that is not XML is an error rather than an empty listing.
TEST(S3StoreFaultTest, AListingIsParsedAsXmlAndGarbageIsAnError) {
  const std::string listing =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<IsTruncated>false</IsTruncated>"
      "<Contents><Key>a&amp;b &#x263A;</Key><Size>3</Size></Contents>"
      "<Contents><Key><![CDATA[ <spaced> ]]></Key><Size>4</Size></Contents>"
      "</ListBucketResult>";
  ScriptedServer server({Response(200, "OK", listing), Response(200, "OK", "<html>oops")});
  auto store = NewS3Store(ScriptedOptions(server));
  auto listed = store->List("");
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].key, " <spaced> ");
  EXPECT_EQ((*listed)[0].size, 4u);
  EXPECT_EQ((*listed)[1].key, "a&b \xE2\x98\xBA");
  auto garbage = store->List("");
  EXPECT_FALSE(garbage.ok());
  EXPECT_TRUE(Has(Msg(garbage.status()), "not XML")) << garbage.status();
}

TEST(S3StoreFaultTest, ResumesABrokenReadWhereItStopped) {
  // The first answer promises 10 bytes and breaks after 5.
  const std::string broken =
      "HTTP/1.1 200 OK\r\nConnection: close\r\nETag: \"v1\"\r\nContent-Length: 10\r\n\r\n01234";
  ScriptedServer server({broken, Response(206, "Partial Content", "56789",
                                          "ETag: \"v1\"\r\nContent-Range: bytes 5-9/10\r\n")});
  std::string got;
  int chunks = 0;
  absl::Status s = NewS3Store(ScriptedOptions(server))->Read("k", [&](std::string_view c) {
    got.append(c);
    ++chunks;
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(got, "0123456789");
  const auto requests = server.Requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_FALSE(Has(requests[0], "Range:")) << requests[0];
  EXPECT_TRUE(Has(requests[1], "Range: bytes=5-")) << requests[1];
  EXPECT_TRUE(Has(requests[1], "If-Match: \"v1\"")) << requests[1];
}

TEST(S3StoreFaultTest, ResumeSkipsWhatAServerIgnoringRangeRepeats) {
  const std::string broken =
      "HTTP/1.1 200 OK\r\nConnection: close\r\nETag: \"v1\"\r\nContent-Length: 10\r\n\r\n01234";
  ScriptedServer server({broken, Response(200, "OK", "0123456789", "ETag: \"v1\"\r\n")});
  auto got = NewS3Store(ScriptedOptions(server))->Get("k");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "0123456789");
}

TEST(S3StoreFaultTest, CompleteThatAnswers200WithAnErrorIsRetried) {
  const std::string xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  ScriptedServer server({
      Response(200, "OK",
               xml + "<InitiateMultipartUploadResult><UploadId>up&amp;1</UploadId>"
                     "</InitiateMultipartUploadResult>"),
      Response(200, "OK", "", "ETag: \"p1\"\r\n"),
      Response(200, "OK", "", "ETag: \"p2\"\r\n"),
      Response(200, "OK", xml + "<Error><Code>InternalError</Code><Message>x</Message></Error>"),
      Response(200, "OK",
               xml + "<CompleteMultipartUploadResult><Key>k</Key></CompleteMultipartUploadResult>"),
  });
  auto writer = NewS3Store(ScriptedOptions(server))->Create("k");
  ASSERT_TRUE(writer.ok());
  std::mt19937_64 rng(9);
  ASSERT_TRUE((*writer)->Write(RandomBytes(rng, 6 * kMiB)).ok());
  absl::Status s = (*writer)->Commit();
  EXPECT_TRUE(s.ok()) << s;
  const auto requests = server.Requests();
  ASSERT_EQ(requests.size(), 5u);
  EXPECT_TRUE(Has(requests[0], "POST /b/k?uploads= HTTP/1.1")) << requests[0];
  // The upload id is entity-decoded from the XML and encoded in the query.
  EXPECT_TRUE(Has(requests[1], "PUT /b/k?partNumber=1&uploadId=up%261 HTTP/1.1")) << requests[1];
  EXPECT_TRUE(Has(requests[2], "PUT /b/k?partNumber=2&uploadId=up%261 HTTP/1.1")) << requests[2];
  EXPECT_TRUE(Has(requests[3], "POST /b/k?uploadId=up%261 HTTP/1.1")) << requests[3];
  EXPECT_TRUE(Has(requests[4], "POST /b/k?uploadId=up%261 HTTP/1.1")) << requests[4];
}

TEST(S3StoreFaultTest, AbandonedWriterAbortsItsUpload) {
  // (s3rver 3.7 answers AbortMultipartUpload with 405, so the abort is checked here.)
  const std::string xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  ScriptedServer server({
      Response(200, "OK",
               xml + "<InitiateMultipartUploadResult><UploadId>u1</UploadId>"
                     "</InitiateMultipartUploadResult>"),
      Response(200, "OK", "", "ETag: \"p1\"\r\n"),
      Response(204, "No Content", ""),
  });
  {
    auto writer = NewS3Store(ScriptedOptions(server))->Create("k");
    ASSERT_TRUE(writer.ok());
    std::mt19937_64 rng(11);
    ASSERT_TRUE((*writer)->Write(RandomBytes(rng, 6 * kMiB)).ok());
  }
  const auto requests = server.Requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_TRUE(Has(requests[2], "DELETE /b/k?uploadId=u1 HTTP/1.1")) << requests[2];
}

}  // namespace
}  // namespace steward

namespace steward {
namespace {

// backup.s3.ca_file (issue 16, part 6): an S3-compatible server behind a private CA (MinIO or
// Ceph on-prem). With the CA bundle every call works; without it, the certificate is refused
// with a message that says so, and nothing is written.
TEST(S3StorePrivateCaTest, AnEndpointBehindAPrivateCaNeedsItsCaFile) {
  if (S3rver::Binary().empty()) GTEST_FAIL() << "s3rver is not installed";
  namespace fs = std::filesystem;
  std::string dir = (fs::temp_directory_path() / "steward-s3ca-XXXXXX").string();
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  ASSERT_TRUE(CreateCa(dir, "private s3 ca").ok());
  CertRequest req;
  req.common_name = "s3.internal";
  req.ip_addresses = {"127.0.0.1"};
  req.server_auth = true;
  req.lifetime = std::chrono::hours(24);
  ASSERT_TRUE(
      IssueCert(dir + "/ca.crt", dir + "/ca.key", req, dir + "/s3.crt", dir + "/s3.key").ok());
  auto server = S3rver::Start({kBucket}, "127.0.0.1", dir + "/s3.crt", dir + "/s3.key");
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_EQ((*server)->Endpoint().rfind("https://", 0), 0u);

  S3Options o;
  o.bucket = kBucket;
  o.prefix = "it/private-ca";
  o.endpoint = (*server)->Endpoint();
  o.path_style = true;
  o.access_key_id = S3rver::kAccessKey;
  o.secret_access_key = S3rver::kSecretKey;
  o.timeout_seconds = 10;
  // Without the CA: refused, naming the certificate problem.
  absl::Status refused = NewS3Store(o)->Put("k", "v");
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(absl::AsciiStrToLower(refused.message()).find("certificate"), std::string::npos)
      << refused;
  // With it: the whole protocol works.
  o.ca_file = dir + "/ca.crt";
  auto store = NewS3Store(o);
  ASSERT_TRUE(store->Put("k", "v").ok());
  auto got = store->Get("k");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "v");
  auto listed = store->List("");
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->size(), 1u);
  // stewardctl with the store alone (issue 36, part 3): the CA from AWS_CA_BUNDLE, as the AWS
  // CLI takes it; without it the certificate is refused, and a bundle that cannot be read is
  // named.
  using testing::RunCommand;
  using testing::RunResult;
  auto ctl = [&](const std::string& bundle) {
    std::vector<std::string> argv = {"/usr/bin/env", "AWS_ENDPOINT_URL=" + (*server)->Endpoint(),
                                     absl::StrCat("AWS_ACCESS_KEY_ID=", S3rver::kAccessKey),
                                     absl::StrCat("AWS_SECRET_ACCESS_KEY=", S3rver::kSecretKey)};
    if (!bundle.empty()) argv.push_back("AWS_CA_BUNDLE=" + bundle);
    for (const char* a : {STEWARDCTL_BIN, "list-backups", "--backup-store"}) argv.push_back(a);
    argv.push_back(absl::StrCat("s3://", kBucket, "/it/private-ca"));
    argv.push_back("--cluster");
    argv.push_back("ca");
    return RunCommand(argv, std::chrono::seconds(60));
  };
  RunResult with = ctl(dir + "/ca.crt");
  EXPECT_EQ(with.exit_code, 0) << with.output;
  RunResult without = ctl("");
  EXPECT_NE(without.exit_code, 0) << without.output;
  EXPECT_NE(absl::AsciiStrToLower(without.output).find("certificate"), std::string::npos)
      << without.output;
  RunResult missing = ctl(dir + "/no-such.crt");
  EXPECT_NE(missing.exit_code, 0) << missing.output;
  EXPECT_NE(missing.output.find("AWS_CA_BUNDLE"), std::string::npos) << missing.output;
  server->reset();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace steward
