// SigV4 against AWS's published vectors: the aws-sig-v4-test-suite cases (service "service") and
// the worked S3 examples of "Signature Calculations for the Authorization Header: Transferring
// Payload in a Single Chunk" (service "s3"). The expected strings are AWS's; s3rver does not check
// signatures, so these tests are what keeps our signing honest.
#include "backup/sigv4.h"

#include <chrono>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace steward::sigv4 {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The test suite's credentials and time.
const Credentials kSuiteCredentials{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", ""};
constexpr char kSuiteDate[] = "20150830T123600Z";

// The S3 documentation's credentials and time.
const Credentials kS3Credentials{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                                 ""};
constexpr char kS3Date[] = "20130524T000000Z";
constexpr char kS3Host[] = "examplebucket.s3.amazonaws.com";

Request SuiteGet(Params query = {}) {
  Request r;
  r.method = "GET";
  r.path = "/";
  r.query = std::move(query);
  r.headers = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", kSuiteDate}};
  return r;
}

TEST(SigV4Test, GetVanilla) {
  Signed s = Sign(SuiteGet(), kSuiteCredentials, "us-east-1", "service", kSuiteDate);
  EXPECT_EQ(s.canonical_request,
            "GET\n"
            "/\n"
            "\n"
            "host:example.amazonaws.com\n"
            "x-amz-date:20150830T123600Z\n"
            "\n"
            "host;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(s.string_to_sign,
            "AWS4-HMAC-SHA256\n"
            "20150830T123600Z\n"
            "20150830/us-east-1/service/aws4_request\n"
            "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63");
  EXPECT_EQ(s.signature, "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
  EXPECT_EQ(s.authorization,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
            "SignedHeaders=host;x-amz-date, "
            "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
}

TEST(SigV4Test, GetVanillaQueryOrderKeyCase) {
  // Sent as ?Param2=value2&Param1=value1: the signer sorts.
  Signed s = Sign(SuiteGet({{"Param2", "value2"}, {"Param1", "value1"}}), kSuiteCredentials,
                  "us-east-1", "service", kSuiteDate);
  EXPECT_EQ(s.canonical_request,
            "GET\n"
            "/\n"
            "Param1=value1&Param2=value2\n"
            "host:example.amazonaws.com\n"
            "x-amz-date:20150830T123600Z\n"
            "\n"
            "host;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(s.signature, "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500");
}

TEST(SigV4Test, GetVanillaQueryOrderEncoded) {
  // ?Param-3=Value3&Param=Value2&%E1%88%B4=Value1: names sort by their encoded bytes.
  Signed s =
      Sign(SuiteGet({{"Param-3", "Value3"}, {"Param", "Value2"}, {"\xE1\x88\xB4", "Value1"}}),
           kSuiteCredentials, "us-east-1", "service", kSuiteDate);
  EXPECT_EQ(s.canonical_request,
            "GET\n"
            "/\n"
            "%E1%88%B4=Value1&Param=Value2&Param-3=Value3\n"
            "host:example.amazonaws.com\n"
            "x-amz-date:20150830T123600Z\n"
            "\n"
            "host;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(s.signature, "371d3713e185cc334048618a97f809c9ffe339c62934c032af5a0e595648fcac");
}

TEST(SigV4Test, PostXWwwFormUrlencoded) {
  Request r;
  r.method = "POST";
  r.path = "/";
  r.headers = {{"Content-Type", "application/x-www-form-urlencoded"},
               {"Host", "example.amazonaws.com"},
               {"X-Amz-Date", kSuiteDate}};
  r.payload_hash = Sha256Hex("Param1=value1");
  Signed s = Sign(r, kSuiteCredentials, "us-east-1", "service", kSuiteDate);
  EXPECT_EQ(s.canonical_request,
            "POST\n"
            "/\n"
            "\n"
            "content-type:application/x-www-form-urlencoded\n"
            "host:example.amazonaws.com\n"
            "x-amz-date:20150830T123600Z\n"
            "\n"
            "content-type;host;x-amz-date\n"
            "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e");
  EXPECT_EQ(s.string_to_sign,
            "AWS4-HMAC-SHA256\n"
            "20150830T123600Z\n"
            "20150830/us-east-1/service/aws4_request\n"
            "42a5e5bb34198acb3e84da4f085bb7927f2bc277ca766e6d19c73c2154021281");
  EXPECT_EQ(s.signature, "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a");
  EXPECT_EQ(s.authorization,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
            "SignedHeaders=content-type;host;x-amz-date, "
            "Signature=ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a");
}

Request S3Get(std::string path, Params query = {}) {
  Request r;
  r.method = "GET";
  r.path = std::move(path);
  r.query = std::move(query);
  r.headers = {
      {"Host", kS3Host}, {"x-amz-content-sha256", kEmptyPayloadSha256}, {"x-amz-date", kS3Date}};
  return r;
}

TEST(SigV4Test, S3GetObjectWithRange) {
  Request r = S3Get("/test.txt");
  r.headers.emplace_back("Range", "bytes=0-9");
  Signed s = Sign(r, kS3Credentials, "us-east-1", "s3", kS3Date);
  EXPECT_EQ(
      s.canonical_request,
      "GET\n"
      "/test.txt\n"
      "\n"
      "host:examplebucket.s3.amazonaws.com\n"
      "range:bytes=0-9\n"
      "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
      "x-amz-date:20130524T000000Z\n"
      "\n"
      "host;range;x-amz-content-sha256;x-amz-date\n"
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(s.string_to_sign,
            "AWS4-HMAC-SHA256\n"
            "20130524T000000Z\n"
            "20130524/us-east-1/s3/aws4_request\n"
            "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  EXPECT_EQ(s.signature, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  EXPECT_EQ(s.authorization,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(SigV4Test, S3PutObjectEncodesTheKeyOnce) {
  const std::string body = "Welcome to Amazon S3.";
  Request r;
  r.method = "PUT";
  r.path = "/" + UriEncode("test$file.text", false);
  r.payload_hash = Sha256Hex(body);
  ASSERT_EQ(r.payload_hash, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  r.headers = {{"Date", "Fri, 24 May 2013 00:00:00 GMT"},
               {"Host", kS3Host},
               {"x-amz-content-sha256", r.payload_hash},
               {"x-amz-date", kS3Date},
               {"x-amz-storage-class", "REDUCED_REDUNDANCY"}};
  Signed s = Sign(r, kS3Credentials, "us-east-1", "s3", kS3Date);
  EXPECT_EQ(
      s.canonical_request,
      "PUT\n"
      "/test%24file.text\n"
      "\n"
      "date:Fri, 24 May 2013 00:00:00 GMT\n"
      "host:examplebucket.s3.amazonaws.com\n"
      "x-amz-content-sha256:44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072\n"
      "x-amz-date:20130524T000000Z\n"
      "x-amz-storage-class:REDUCED_REDUNDANCY\n"
      "\n"
      "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class\n"
      "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  EXPECT_EQ(s.string_to_sign,
            "AWS4-HMAC-SHA256\n"
            "20130524T000000Z\n"
            "20130524/us-east-1/s3/aws4_request\n"
            "9e0e90d9c76de8fa5b200d8c849cd5b8dc7a3be3951ddb7f6a76b4158342019d");
  EXPECT_EQ(s.signature, "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

TEST(SigV4Test, S3ValuelessParameterIsSignedWithAnEmptyValue) {
  // GET ?lifecycle: the parameter is signed (and must be sent) as "lifecycle=".
  Signed s = Sign(S3Get("/", {{"lifecycle", ""}}), kS3Credentials, "us-east-1", "s3", kS3Date);
  EXPECT_EQ(
      s.canonical_request,
      "GET\n"
      "/\n"
      "lifecycle=\n"
      "host:examplebucket.s3.amazonaws.com\n"
      "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
      "x-amz-date:20130524T000000Z\n"
      "\n"
      "host;x-amz-content-sha256;x-amz-date\n"
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(s.string_to_sign,
            "AWS4-HMAC-SHA256\n"
            "20130524T000000Z\n"
            "20130524/us-east-1/s3/aws4_request\n"
            "9766c798316ff2757b517bc739a67f6213b4ab36dd5da2f94eaebf79c77395ca");
  EXPECT_EQ(s.signature, "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
}

TEST(SigV4Test, S3ListObjects) {
  Signed s = Sign(S3Get("/", {{"prefix", "J"}, {"max-keys", "2"}}), kS3Credentials, "us-east-1",
                  "s3", kS3Date);
  EXPECT_THAT(s.canonical_request, HasSubstr("\n/\nmax-keys=2&prefix=J\n"));
  EXPECT_EQ(s.signature, "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

TEST(SigV4Test, SessionTokenIsSignedLikeAnyHeader) {
  Request r = S3Get("/k");
  r.headers.emplace_back("X-Amz-Security-Token", "token-value");
  Signed with = Sign(r, {"AK", "secret", "token-value"}, "us-east-1", "s3", kS3Date);
  EXPECT_EQ(with.signed_headers, "host;x-amz-content-sha256;x-amz-date;x-amz-security-token");
  EXPECT_THAT(with.canonical_request, HasSubstr("\nx-amz-security-token:token-value\n"));
}

TEST(SigV4Test, HeaderValuesAreTrimmedAndRepeatedNamesJoined) {
  Request r;
  r.method = "GET";
  r.headers = {{"Host", "h"},
               {"My-Header1", "  a   b   c  "},
               {"X-Amz-Date", kSuiteDate},
               {"my-header1", "d"}};
  Signed s = Sign(r, kSuiteCredentials, "us-east-1", "service", kSuiteDate);
  EXPECT_THAT(s.canonical_request, HasSubstr("\nmy-header1:a b c,d\n"));
  EXPECT_EQ(s.signed_headers, "host;my-header1;x-amz-date");
}

TEST(SigV4Test, NothingSignedCarriesTheSecret) {
  Signed s = Sign(SuiteGet(), kSuiteCredentials, "us-east-1", "service", kSuiteDate);
  for (const std::string* field : {&s.canonical_request, &s.string_to_sign, &s.signature,
                                   &s.signed_headers, &s.authorization}) {
    EXPECT_THAT(*field, Not(HasSubstr(kSuiteCredentials.secret_access_key)));
  }
}

TEST(SigV4Test, UriEncode) {
  EXPECT_EQ(UriEncode("AZaz09-_.~", true), "AZaz09-_.~");
  EXPECT_EQ(UriEncode("a b+c=d&e", true), "a%20b%2Bc%3Dd%26e");
  EXPECT_EQ(UriEncode("dir/sub/file", false), "dir/sub/file");
  EXPECT_EQ(UriEncode("dir/sub", true), "dir%2Fsub");
  EXPECT_EQ(UriEncode("\xC3\xBC", true), "%C3%BC");  // UTF-8 bytes, uppercase hex
  EXPECT_EQ(UriEncode("!'()*$", true), "%21%27%28%29%2A%24");
}

TEST(SigV4Test, CanonicalQueryEncodesValuesAndSorts) {
  EXPECT_EQ(CanonicalQuery({{"uploads", ""}}), "uploads=");
  EXPECT_EQ(CanonicalQuery({{"uploadId", "a/b+c=="}, {"partNumber", "2"}}),
            "partNumber=2&uploadId=a%2Fb%2Bc%3D%3D");
  EXPECT_EQ(CanonicalQuery({{"prefix", "a b/"}, {"list-type", "2"}, {"continuation-token", "x"}}),
            "continuation-token=x&list-type=2&prefix=a%20b%2F");
  EXPECT_EQ(CanonicalQuery({}), "");
}

TEST(SigV4Test, AmzDateIsUtc) {
  using std::chrono::seconds;
  EXPECT_EQ(AmzDate(std::chrono::system_clock::time_point(seconds(1440938160))), kSuiteDate);
  EXPECT_EQ(AmzDate(std::chrono::system_clock::time_point(seconds(1369353600))), kS3Date);
}

TEST(SigV4Test, Sha256Hex) {
  EXPECT_EQ(Sha256Hex(""), kEmptyPayloadSha256);
  EXPECT_EQ(Sha256Hex("Param1=value1"),
            "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e");
}

}  // namespace
}  // namespace steward::sigv4
