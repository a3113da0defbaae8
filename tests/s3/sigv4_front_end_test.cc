// The S3 tests' front end before a real s3rver, as harnesses in other
// network namespaces use it (granary-test-s3, the soak): it serves on the
// address it is given and nowhere else, and a write through it is atomic, as
// S3's are: a GET racing PUTs of an object sees the old bytes or the new,
// whole, each with its own ETag, and a PUT is answered only once the object
// is served as written. Requests are signed by libcurl's SigV4.
#include <curl/curl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <strings.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/source_access/s3_location.h"
#include "source/s3_client.h"
#include "tests/support/s3_test_endpoint.h"

namespace granary::testing {
namespace {

constexpr char kBucket[] = "data";
constexpr char kKey[] = "object.bin";

struct Reply {
  CURLcode code = CURLE_OK;
  long status = 0;
  std::string etag;
  std::string body;
};

size_t Append(char* data, size_t size, size_t count, void* body) {
  static_cast<std::string*>(body)->append(data, size * count);
  return size * count;
}

size_t KeepEtag(char* data, size_t size, size_t count, void* etag) {
  std::string_view line(data, size * count);
  constexpr std::string_view kName = "etag: ";
  if (line.size() > kName.size() && strncasecmp(line.data(), kName.data(), kName.size()) == 0) {
    line.remove_prefix(kName.size());
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.remove_suffix(1);
    *static_cast<std::string*>(etag) = std::string(line);
  }
  return size * count;
}

// `method` of kKey at `endpoint`, signed with s3rver's keys; a PUT sends `bytes`.
Reply Send(const std::string& method, const std::string& endpoint, const std::string& bytes = "") {
  S3Location location;
  location.bucket = kBucket;
  location.endpoint = endpoint;
  const std::string url = S3RequestUrl(location, kKey);
  const std::string credentials = absl::StrCat(kS3rverKey, ":", kS3rverSecret);
  Reply reply;
  CURL* curl = curl_easy_init();
  curl_slist* headers = curl_slist_append(nullptr, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
  // Not libcurl's form type for a body it posts, whose size httplib caps at 8 KiB.
  headers = curl_slist_append(headers, "Content-Type: application/octet-stream");
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
  curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, "aws:amz:us-east-1:s3");
  curl_easy_setopt(curl, CURLOPT_USERPWD, credentials.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Append);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &reply.body);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &KeepEtag);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &reply.etag);
  if (method == "PUT") {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, bytes.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(bytes.size()));
  }
  reply.code = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &reply.status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  return reply;
}

TEST(SigV4FrontEndTest, ServesOnTheAddressItIsGivenAndNowhereElse) {
  auto s3 = StartVerifiedS3rver({kBucket}, "127.0.0.2");
  ASSERT_TRUE(s3.ok()) << s3.status();
  const std::string endpoint = s3->front->endpoint();
  ASSERT_THAT(endpoint, ::testing::StartsWith("http://127.0.0.2:"));
  ASSERT_TRUE(s3->s3rver->Put(kBucket, kKey, "held by s3rver").ok());

  Reply got = Send("GET", endpoint);
  EXPECT_EQ(got.code, CURLE_OK) << curl_easy_strerror(got.code);
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(got.body, "held by s3rver");
  EXPECT_EQ(s3->front->object_gets(), 1);

  const std::string port = endpoint.substr(endpoint.rfind(':') + 1);
  Reply elsewhere = Send("GET", absl::StrCat("http://127.0.0.1:", port));
  EXPECT_EQ(elsewhere.code, CURLE_COULDNT_CONNECT) << curl_easy_strerror(elsewhere.code);
  EXPECT_EQ(s3->front->object_gets(), 1);
}

TEST(SigV4FrontEndTest, GetsRacingPutsSeeOneWholeObjectWithItsOwnEtag) {
  auto s3 = StartVerifiedS3rver({kBucket});
  ASSERT_TRUE(s3.ok()) << s3.status();
  const std::string endpoint = s3->front->endpoint();
  // Large enough that s3rver writes each in many pieces.
  const std::string versions[] = {std::string(8 << 20, 'a'), std::string(8 << 20, 'b')};
  ASSERT_EQ(Send("PUT", endpoint, versions[0]).status, 200);

  std::atomic<bool> writing = true;
  std::thread writer([&] {
    for (int i = 1; i <= 12; ++i) {
      const std::string& bytes = versions[i % 2];
      Reply put = Send("PUT", endpoint, bytes);
      EXPECT_EQ(put.status, 200) << put.body;
      Reply read_back = Send("GET", endpoint);
      EXPECT_TRUE(read_back.body == bytes) << "PUT " << i << " answered before it was served";
    }
    writing = false;
  });
  std::map<char, std::string> etag_of_version;
  int gets = 0;
  while (writing) {
    Reply got = Send("GET", endpoint);
    ++gets;
    const bool whole = got.body == versions[0] || got.body == versions[1];
    EXPECT_TRUE(got.status == 200 && whole) << "GET " << gets << ": HTTP " << got.status << ", "
                                            << got.body.size() << " bytes, not one version whole";
    if (!whole) break;
    auto kept = etag_of_version.emplace(got.body[0], got.etag).first;
    EXPECT_EQ(kept->second, got.etag) << "GET " << gets << ": another ETag for the same bytes";
  }
  writer.join();
  EXPECT_GT(gets, 0);
  EXPECT_EQ(s3->front->signature_refusals(), 0);
}

}  // namespace
}  // namespace granary::testing
