// The pure parts of S3 sources: source strings, the canonical URLs that are
// signed, ListObjectsV2 and error documents, keys mapped to a tree, and where
// credentials are found.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "common/source_access/s3_location.h"
#include "source/s3_client.h"
#include "source/s3_credentials.h"
#include "source/s3_tree.h"
#include "source/s3_xml.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

TEST(S3LocationTest, ParsesAndFormatsCanonically) {
  auto location = ParseS3Source(
      "s3://my-bucket/train/set?region=eu-west-1&endpoint=HTTP%3A%2F%2FMinio.local%3A9000%2F"
      "&profile=ml&readers_gid=1000");
  ASSERT_TRUE(location.ok()) << location.status();
  EXPECT_EQ(location->bucket, "my-bucket");
  EXPECT_EQ(location->prefix, "train/set/");
  EXPECT_EQ(location->endpoint, "http://minio.local:9000");
  EXPECT_EQ(location->region, "eu-west-1");
  EXPECT_EQ(location->profile, "ml");
  EXPECT_EQ(location->readers_gid, 1000u);
  EXPECT_EQ(location->addressing, S3Addressing::kPath);
  const std::string canonical = FormatS3Source(*location);
  EXPECT_EQ(canonical,
            "s3://my-bucket/train/set/?endpoint=http%3A%2F%2Fminio.local%3A9000&region=eu-west-1"
            "&addressing=path&profile=ml&readers_gid=1000");
  EXPECT_EQ(*ParseS3Source(canonical), *location);
}

TEST(S3LocationTest, WithoutAnEndpointIsAwsVirtualHosted) {
  auto location = ParseS3Source("s3://bucket?region=us-west-2");
  ASSERT_TRUE(location.ok());
  EXPECT_EQ(location->endpoint, "https://s3.us-west-2.amazonaws.com");
  EXPECT_EQ(location->addressing, S3Addressing::kVirtualHosted);
  EXPECT_EQ(location->prefix, "");
}

TEST(S3LocationTest, BadSourcesAreRefusedNamingWhatIsWrong) {
  EXPECT_THAT(ParseS3Source("s3://Bad_Bucket").status().message(), HasSubstr("bucket"));
  EXPECT_THAT(ParseS3Source("s3://bucket?color=red").status().message(),
              HasSubstr("unknown parameter 'color'"));
  EXPECT_THAT(ParseS3Source("s3://bucket?endpoint=ftp%3A%2F%2Fx").status().message(),
              HasSubstr("not an http:// or https:// URL"));
  EXPECT_THAT(ParseS3Source("s3://bucket?endpoint=http%3A%2F%2Fx%2Fpath").status().message(),
              HasSubstr("no path"));
  EXPECT_THAT(ParseS3Source("s3://bucket?addressing=sideways").status().message(),
              HasSubstr("path or virtual"));
  EXPECT_THAT(ParseS3Source("s3://bucket?readers_gid=x").status().message(), HasSubstr("group id"));
  EXPECT_THAT(ParseS3Source("s3://bucket/a%2").status().message(), HasSubstr("two hex digits"));
}

TEST(S3LocationTest, DecodesWhatS3UriEncodeWrites) {
  const std::string text = "a b+c%d/\xc3\xa9~";
  EXPECT_EQ(S3UriDecode(S3UriEncode(text, false), false), text);
  EXPECT_EQ(S3UriDecode("a+b%2B", true), "a b+");
  EXPECT_EQ(S3UriDecode("a+b", false), "a+b");
  EXPECT_EQ(S3UriDecode("%4", false), std::nullopt);
  EXPECT_EQ(S3UriDecode("%zz", false), std::nullopt);
}

TEST(S3RequestUrlTest, IsTheCanonicalFormThatIsSigned) {
  S3Location location;
  location.bucket = "b";
  location.endpoint = "http://127.0.0.1:9000";
  EXPECT_EQ(S3RequestUrl(location, "a b/c+d%e/\xc3\xa9~_.-"),
            "http://127.0.0.1:9000/b/a%20b/c%2Bd%25e/%C3%A9~_.-");
  EXPECT_EQ(S3RequestUrl(location, "",
                         {{"prefix", "x y/"}, {"list-type", "2"}, {"continuation-token", "a+b="}}),
            "http://127.0.0.1:9000/b/?continuation-token=a%2Bb%3D&list-type=2&prefix=x%20y%2F");
  EXPECT_EQ(S3RequestUrl(location, "", {{"prefix", ""}}), "http://127.0.0.1:9000/b/?prefix=");
  location.addressing = S3Addressing::kVirtualHosted;
  EXPECT_EQ(S3RequestUrl(location, "k"), "http://b.127.0.0.1:9000/k");
}

TEST(S3XmlTest, ParsesAListingInAnyNamespaceAndDecodesUrlEncodedKeys) {
  auto page = ParseS3ListPage(
      R"(<?xml version="1.0"?><ListBucketResult xmlns="http://example.com/other/">
      <EncodingType>url</EncodingType><IsTruncated>true</IsTruncated>
      <NextContinuationToken>tok/en</NextContinuationToken>
      <Contents><Key>a+b%2Bc%25</Key><Size>12</Size><ETag>&quot;abc&quot;</ETag>
      <LastModified>2026-01-02T03:04:05.250Z</LastModified></Contents></ListBucketResult>)");
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->objects.size(), 1u);
  EXPECT_EQ(page->objects[0].key, "a b+c%");
  EXPECT_EQ(page->objects[0].size, 12u);
  EXPECT_EQ(page->objects[0].etag, "\"abc\"");
  EXPECT_EQ(page->objects[0].last_modified_ns, 1767323045'250'000'000);
  EXPECT_EQ(page->next_continuation_token, "tok/en");
}

TEST(S3XmlTest, RefusesMalformedListingsNamingWhatIsWrong) {
  EXPECT_THAT(ParseS3ListPage("not xml").status().message(), HasSubstr("not an XML document"));
  EXPECT_THAT(ParseS3ListPage("<Other/>").status().message(), HasSubstr("<Other>"));
  EXPECT_THAT(ParseS3ListPage("<ListBucketResult><Contents><Key>k</Key><Size>x</Size>"
                              "</Contents></ListBucketResult>")
                  .status()
                  .message(),
              HasSubstr("size 'x'"));
  EXPECT_THAT(
      ParseS3ListPage("<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>")
          .status()
          .message(),
      HasSubstr("NextContinuationToken"));
  EXPECT_EQ(S3ErrorSummary("<Error><Code>SignatureDoesNotMatch</Code><Message>no</Message>"
                           "</Error>"),
            "SignatureDoesNotMatch: no");
  EXPECT_EQ(S3ErrorSummary("<html/>"), "");
}

S3Object Object(std::string key, uint64_t size = 1, int64_t mtime_ns = 5) {
  return {std::move(key), size, "\"e\"", mtime_ns};
}

TEST(S3TreeTest, KeysBecomeFilesInDirectories) {
  S3Location location;
  location.prefix = "p/";
  location.readers_gid = 44;
  ScannedTree tree = TreeOfObjects(
      {Object("p/"), Object("p/a/b/c.jpg", 3, 9), Object("p/marker/", 0, 7), Object("p/top")},
      location);
  EXPECT_EQ(tree.skipped.count, 0u);
  std::map<std::string, ManifestEntry> entries;
  for (const ManifestEntry& entry : tree.entries) entries[entry.path] = entry;
  ASSERT_EQ(entries.size(), 6u);  // "", a, a/b, marker, a/b/c.jpg, top.
  EXPECT_EQ(entries["a/b"].type, EntryType::kDirectory);
  EXPECT_EQ(entries["a/b"].mtime_ns, 9);
  EXPECT_EQ(entries["a/b"].mode, S_IFDIR | 0550u);
  EXPECT_EQ(entries["marker"].type, EntryType::kDirectory);
  EXPECT_EQ(entries["a/b/c.jpg"].size, 3u);
  EXPECT_EQ(entries["a/b/c.jpg"].etag(), "\"e\"");
  EXPECT_EQ(entries["a/b/c.jpg"].mode, S_IFREG | 0440u);
  EXPECT_EQ(entries["a/b/c.jpg"].gid, 44u);
  EXPECT_EQ(entries[""].mtime_ns, 9);
}

TEST(S3TreeTest, KeysThatCannotBePathsAreSkippedWithTheReason) {
  S3Location location;
  ScannedTree tree =
      TreeOfObjects({Object("a"), Object("a/b"), Object("x//y"), Object("./z"), Object("../z"),
                     Object(std::string(256, 'n')), Object(std::string(255, 'n'))},
                    location);
  EXPECT_EQ(tree.skipped.count, 5u);
  std::map<std::string, std::string> reasons;
  for (const SkippedEntry& entry : tree.skipped.listed) reasons[entry.path] = entry.reason;
  EXPECT_THAT(reasons["a"], HasSubstr("both an object and the prefix"));
  EXPECT_THAT(reasons["x//y"], HasSubstr("empty path component"));
  EXPECT_THAT(reasons["./z"], HasSubstr("'.' or '..'"));
  EXPECT_THAT(reasons["../z"], HasSubstr("'.' or '..'"));
  EXPECT_THAT(reasons[std::string(256, 'n')], HasSubstr("255"));
  EXPECT_EQ(tree.entries.size(), 4u);  // "", a, a/b, the 255-byte name.
}

class S3CredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("s3-credentials-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_ / ".aws");
    setenv("HOME", dir_.c_str(), 1);
    for (const char* name : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                             "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"}) {
      unsetenv(name);
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / ".aws" / name) << text;
  }
  std::filesystem::path dir_;
};

TEST_F(S3CredentialsTest, TheEnvironmentComesFirstUnlessAProfileIsNamed) {
  Write("credentials", "[default]\naws_access_key_id = file-key\naws_secret_access_key = s\n");
  setenv("AWS_ACCESS_KEY_ID", "env-key", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "env-secret", 1);
  setenv("AWS_SESSION_TOKEN", "env-token", 1);
  auto keys = FindS3Credentials("");
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys->access_key_id, "env-key");
  EXPECT_EQ(keys->session_token, "env-token");
  EXPECT_EQ(FindS3Credentials("default")->access_key_id, "file-key");
}

TEST_F(S3CredentialsTest, ProfilesComeFromTheCredentialsThenTheConfigFile) {
  Write("credentials", "# keys\n[ml]\n aws_access_key_id=ml-key \naws_secret_access_key = ml\n");
  Write("config",
        "[profile cfg]\nregion = x\naws_access_key_id = cfg-key\n"
        "aws_secret_access_key = c\n[default]\naws_access_key_id = d\n"
        "aws_secret_access_key = d\n");
  EXPECT_EQ(FindS3Credentials("ml")->access_key_id, "ml-key");
  EXPECT_EQ(FindS3Credentials("cfg")->access_key_id, "cfg-key");
  setenv("AWS_PROFILE", "ml", 1);
  EXPECT_EQ(FindS3Credentials("")->access_key_id, "ml-key");
  unsetenv("AWS_PROFILE");
  EXPECT_EQ(FindS3Credentials("")->access_key_id, "d");
}

TEST_F(S3CredentialsTest, MissingAndHalfProfilesAreNamedAndNoKeyIsQuoted) {
  Write("credentials", "[half]\naws_access_key_id = only-the-key\n");
  auto missing = FindS3Credentials("nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(missing.status().message(), HasSubstr("profile 'nope'"));
  EXPECT_THAT(missing.status().message(), HasSubstr((dir_ / ".aws/credentials").string()));
  auto half = FindS3Credentials("half");
  EXPECT_EQ(half.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(half.status().message(), ::testing::Not(HasSubstr("only-the-key")));
}

}  // namespace
}  // namespace granary
