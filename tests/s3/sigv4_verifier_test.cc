// The SigV4 verifier of the S3 tests' front end, checked against the
// examples AWS publishes: the S3 API reference's "Signature Calculations for
// the Authorization Header" (GET Object with a range, GET Bucket Lifecycle,
// GET Bucket with a query) and the get-vanilla case of the SigV4 test
// suite. A verifier that passes them refuses what S3 would refuse.
#include "tests/support/sigv4_verifier.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace granary::testing {
namespace {

constexpr char kS3ExampleSecret[] = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
constexpr char kEmptySha256[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

SignedRequest S3Example(std::string target,
                        std::vector<std::pair<std::string, std::string>> extra = {}) {
  SignedRequest request{"GET", std::move(target), {}, ""};
  request.headers = {{"Host", "examplebucket.s3.amazonaws.com"},
                     {"x-amz-content-sha256", kEmptySha256},
                     {"x-amz-date", "20130524T000000Z"}};
  for (auto& header : extra) request.headers.push_back(std::move(header));
  return request;
}

TEST(SigV4VerifierTest, S3GetObjectWithRange) {
  SigV4Computation computed = ComputeSigV4(S3Example("/test.txt", {{"Range", "bytes=0-9"}}),
                                           {"host", "range", "x-amz-content-sha256", "x-amz-date"},
                                           "20130524T000000Z", kS3ExampleSecret, "us-east-1", "s3");
  EXPECT_EQ(computed.canonical_request,
            "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
            "x-amz-content-sha256:" +
                std::string(kEmptySha256) + "\nx-amz-date:20130524T000000Z\n\n" +
                "host;range;x-amz-content-sha256;x-amz-date\n" + kEmptySha256);
  EXPECT_EQ(computed.string_to_sign,
            "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
            "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  EXPECT_EQ(computed.signature, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(SigV4VerifierTest, S3GetBucketLifecycleSignsAnEmptyParameterAsName) {
  SigV4Computation computed =
      ComputeSigV4(S3Example("/?lifecycle"), {"host", "x-amz-content-sha256", "x-amz-date"},
                   "20130524T000000Z", kS3ExampleSecret, "us-east-1", "s3");
  EXPECT_THAT(computed.canonical_request, ::testing::HasSubstr("\n/\nlifecycle=\n"));
  EXPECT_EQ(computed.signature, "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
}

TEST(SigV4VerifierTest, S3ListObjectsSortsTheQuery) {
  SigV4Computation computed = ComputeSigV4(S3Example("/?prefix=J&max-keys=2"),
                                           {"host", "x-amz-content-sha256", "x-amz-date"},
                                           "20130524T000000Z", kS3ExampleSecret, "us-east-1", "s3");
  EXPECT_THAT(computed.canonical_request, ::testing::HasSubstr("\n/\nmax-keys=2&prefix=J\n"));
  EXPECT_EQ(computed.signature, "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

TEST(SigV4VerifierTest, TestSuiteGetVanilla) {
  SignedRequest request{
      "GET", "/", {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}}, ""};
  SigV4Computation computed =
      ComputeSigV4(request, {"host", "x-amz-date"}, "20150830T123600Z",
                   "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "us-east-1", "service");
  EXPECT_EQ(computed.signature, "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
}

TEST(SigV4VerifierTest, RefusesWhatS3Refuses) {
  SignedRequest request = S3Example("/test.txt", {{"Range", "bytes=0-9"}});
  const std::string signature =
      ComputeSigV4(request, {"host", "range", "x-amz-content-sha256", "x-amz-date"},
                   "20130524T000000Z", kS3ExampleSecret, "us-east-1", "s3")
          .signature;
  auto authorize = [&](const std::string& key, const std::string& signed_headers,
                       const std::string& with) {
    SignedRequest copy = request;
    copy.headers.emplace_back("Authorization", "AWS4-HMAC-SHA256 Credential=" + key +
                                                   "/20130524/us-east-1/s3/aws4_request, "
                                                   "SignedHeaders=" +
                                                   signed_headers + ", Signature=" + with);
    return copy;
  };
  const std::string all = "host;range;x-amz-content-sha256;x-amz-date";
  EXPECT_EQ(SigV4Refusal(authorize("AKIAIOSFODNN7EXAMPLE", all, signature), "AKIAIOSFODNN7EXAMPLE",
                         kS3ExampleSecret, "us-east-1"),
            std::nullopt);
  EXPECT_EQ(SigV4Refusal(authorize("AKIAIOSFODNN7EXAMPLE", all, signature), "AKIAIOSFODNN7EXAMPLE",
                         "another secret", "us-east-1"),
            "SignatureDoesNotMatch");
  EXPECT_EQ(SigV4Refusal(authorize("SOMEONE", all, signature), "AKIAIOSFODNN7EXAMPLE",
                         kS3ExampleSecret, "us-east-1"),
            "InvalidAccessKeyId");
  EXPECT_EQ(SigV4Refusal(authorize("AKIAIOSFODNN7EXAMPLE", all, signature), "AKIAIOSFODNN7EXAMPLE",
                         kS3ExampleSecret, "eu-west-1"),
            "AccessDenied");
  EXPECT_EQ(SigV4Refusal(request, "AKIAIOSFODNN7EXAMPLE", kS3ExampleSecret, "us-east-1"),
            "AccessDenied");
  // The server signs the target decoded and encoded again, so "/a b.txt"
  // and "/a%20b.txt" sign alike: a client whose library signs the URL as
  // written must write it in that form (S3RequestUrl).
  SignedRequest raw = S3Example("/a b.txt");
  const std::string raw_signature =
      ComputeSigV4(raw, {"host"}, "20130524T000000Z", kS3ExampleSecret, "us-east-1", "s3")
          .signature;
  SignedRequest encoded = S3Example("/a%20b.txt");
  EXPECT_EQ(ComputeSigV4(encoded, {"host"}, "20130524T000000Z", kS3ExampleSecret, "us-east-1", "s3")
                .signature,
            raw_signature);
}

}  // namespace
}  // namespace granary::testing
