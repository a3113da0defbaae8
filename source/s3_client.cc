#include "source/s3_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/absl_compat.h"
#include "common/base/logging.h"
#include "common/base/printable.h"

namespace granary {
namespace {

// SHA-256 of an empty body: every request here is a GET. s3rver, and S3
// itself, want the header on every signed request.
constexpr std::string_view kEmptyPayloadHeader =
    "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
// How much of an error reply is kept, to quote its code and message.
constexpr size_t kMaxErrorBody = 64 * 1024;
// How large a listing page may be: 1,000 keys of 1 KiB each, with room.
constexpr size_t kMaxListingBody = 16 * 1024 * 1024;

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

struct S3Client::Reply {
  long status = 0;
  std::string etag;
  std::string body;       // Error replies and listings.
  size_t sink_bytes = 0;  // Bytes written to the caller's sink.
  bool overflowed = false;
};

namespace {

// " answered HTTP 503 (SlowDown: Please reduce your request rate.)".
std::string Answered(const S3Client::Reply& reply) {
  std::string summary = S3ErrorSummary(reply.body);
  return absl::StrCat(" answered HTTP ", reply.status,
                      summary.empty() ? "" : absl::StrCat(" (", summary, ")"));
}

struct Transfer {
  CURL* curl;
  std::span<char> sink;
  size_t body_limit;
  S3Client::Reply* reply;
};

}  // namespace

static size_t OnBody(char* data, size_t size, size_t count, void* opaque) {
  auto* transfer = static_cast<Transfer*>(opaque);
  S3Client::Reply* reply = transfer->reply;
  const size_t bytes = size * count;
  long status = 0;
  curl_easy_getinfo(transfer->curl, CURLINFO_RESPONSE_CODE, &status);
  const bool success = status == 200 || status == 206;
  if (success && !transfer->sink.empty()) {
    if (reply->sink_bytes + bytes > transfer->sink.size()) {
      reply->overflowed = true;
      return 0;  // Aborts the transfer: the server sent more than asked for.
    }
    std::memcpy(transfer->sink.data() + reply->sink_bytes, data, bytes);
    reply->sink_bytes += bytes;
    return bytes;
  }
  const size_t limit = success ? transfer->body_limit : kMaxErrorBody;
  if (reply->body.size() + bytes > limit) {
    if (success) {
      reply->overflowed = true;
      return 0;
    }
    reply->body.append(data, limit - reply->body.size());
    return bytes;
  }
  reply->body.append(data, bytes);
  return bytes;
}

static size_t OnHeader(char* data, size_t size, size_t count, void* opaque) {
  auto* reply = static_cast<S3Client::Reply*>(opaque);
  std::string_view line(data, size * count);
  if (absl::StartsWithIgnoreCase(AsAbsl(line), "etag:")) {
    reply->etag = std::string(absl::StripAsciiWhitespace(AsAbsl(line.substr(5))));
  }
  return size * count;
}

void S3RequestSlots::Take() {
  MutexLock lock(&mu_);
  while (free_ == 0) freed_.Wait(&mu_);
  --free_;
}

void S3RequestSlots::Give() {
  {
    MutexLock lock(&mu_);
    ++free_;
  }
  freed_.Signal();
}

S3Client::S3Client(S3Location location, S3Credentials credentials, S3RequestSlots* slots,
                   Options options)
    : location_(std::move(location)),
      credentials_(std::move(credentials)),
      slots_(slots),
      options_(options),
      sigv4_(absl::StrCat("aws:amz:", location_.region, ":s3")) {
  InitCurlOnce();
}

S3Client::~S3Client() {
  for (void* curl : idle_handles_) curl_easy_cleanup(static_cast<CURL*>(curl));
}

std::string S3RequestUrl(const S3Location& location, std::string_view key,
                         std::vector<std::pair<std::string, std::string>> query) {
  std::string url;
  if (location.addressing == S3Addressing::kPath) {
    url = absl::StrCat(location.endpoint, "/", location.bucket, "/");
  } else {
    size_t host = location.endpoint.find("://") + 3;
    url = absl::StrCat(location.endpoint.substr(0, host), location.bucket, ".",
                       location.endpoint.substr(host), "/");
  }
  absl::StrAppend(&url, S3UriEncode(key, /*keep_slashes=*/true));
  std::sort(query.begin(), query.end());
  for (size_t i = 0; i < query.size(); ++i) {
    absl::StrAppend(&url, i == 0 ? "?" : "&", S3UriEncode(query[i].first, false), "=",
                    S3UriEncode(query[i].second, false));
  }
  return url;
}

void* S3Client::TakeHandle() const {
  slots_->Take();
  {
    MutexLock lock(&mu_);
    if (!idle_handles_.empty()) {
      void* curl = idle_handles_.back();
      idle_handles_.pop_back();
      return curl;
    }
  }
  return curl_easy_init();
}

void S3Client::ReturnHandle(void* curl) const {
  if (curl != nullptr) {
    MutexLock lock(&mu_);
    idle_handles_.push_back(curl);
  }
  slots_->Give();
}

absl::StatusOr<S3Client::Reply> S3Client::GetOnce(void* handle, const std::string& url,
                                                  const std::vector<std::string>& headers,
                                                  std::span<char> sink) const {
  CURL* curl = static_cast<CURL*>(handle);
  curl_easy_reset(curl);
  Reply reply;
  Transfer transfer{curl, sink, kMaxListingBody, &reply};
  curl_slist* header_list = nullptr;
  header_list = curl_slist_append(header_list, std::string(kEmptyPayloadHeader).c_str());
  if (!credentials_.session_token.empty()) {
    header_list = curl_slist_append(
        header_list, absl::StrCat("x-amz-security-token: ", credentials_.session_token).c_str());
  }
  for (const std::string& header : headers) {
    header_list = curl_slist_append(header_list, header.c_str());
  }
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_PATH_AS_IS, 1L);
  curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, sigv4_.c_str());
  curl_easy_setopt(curl, CURLOPT_USERNAME, credentials_.access_key_id.c_str());
  curl_easy_setopt(curl, CURLOPT_PASSWORD, credentials_.secret_access_key.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, header_list);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &OnBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &reply);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options_.connect_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.request_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
  CURLcode code = curl_easy_perform(curl);
  curl_slist_free_all(header_list);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &reply.status);
  if (code == CURLE_WRITE_ERROR && reply.overflowed) {
    return absl::DataLossError("the reply is longer than asked for");
  }
  if (code == CURLE_OPERATION_TIMEDOUT) {
    return absl::DeadlineExceededError(
        absl::StrCat("no complete reply within ", options_.request_timeout.count(), " ms"));
  }
  if (code != CURLE_OK) return absl::UnavailableError(curl_easy_strerror(code));
  return reply;
}

absl::StatusOr<S3Client::Reply> S3Client::Get(const std::string& url,
                                              const std::vector<std::string>& headers,
                                              std::span<char> sink, std::string_view what) const {
  thread_local std::minstd_rand jitter(std::random_device{}());
  const std::string where =
      absl::StrCat("S3 endpoint ", location_.endpoint, " (", AsAbsl(what), ")");
  absl::StatusOr<Reply> reply;
  for (int attempt = 0; attempt < options_.attempts; ++attempt) {
    if (attempt > 0) {
      const auto ceiling = options_.first_backoff.count() << (attempt - 1);
      std::this_thread::sleep_for(
          std::chrono::milliseconds(std::uniform_int_distribution<int64_t>(0, ceiling)(jitter)));
    }
    void* curl = TakeHandle();
    if (curl == nullptr) {
      ReturnHandle(nullptr);
      return absl::ResourceExhaustedError("cannot make a curl handle");
    }
    reply = GetOnce(curl, url, headers, sink);
    ReturnHandle(curl);
    const bool retry = reply.ok() ? reply->status >= 500 || reply->status == 429
                                  : absl::IsUnavailable(reply.status()) ||
                                        absl::IsDeadlineExceeded(reply.status());
    if (!retry) break;
    if (attempt + 1 < options_.attempts) {
      GRANARY_LOG(INFO) << where
                        << (reply.ok() ? Answered(*reply)
                                       : ": " + std::string(reply.status().message()))
                        << "; retrying, attempt " << attempt + 2 << " of " << options_.attempts;
    }
  }
  if (!reply.ok()) {
    return absl::Status(
        reply.status().code(),
        absl::StrCat(where, ": ", reply.status().message(),
                     reply.status().code() == absl::StatusCode::kDataLoss
                         ? ""
                         : absl::StrCat(", after ", options_.attempts, " attempts")));
  }
  if (reply->status == 200 || reply->status == 206) return reply;
  std::string message = where + Answered(*reply);
  switch (reply->status) {
    case 401:
    case 403:
      return absl::PermissionDeniedError(
          absl::StrCat(message, "; check granaryd's credentials for this endpoint"));
    case 404:
      return absl::NotFoundError(message);
    case 412:
      return absl::FailedPreconditionError(message);
    case 416:
      return absl::OutOfRangeError(message);
    default:
      return reply->status >= 500 || reply->status == 429
                 ? absl::UnavailableError(
                       absl::StrCat(message, ", after ", options_.attempts, " attempts"))
                 : absl::InvalidArgumentError(message);
  }
}

absl::StatusOr<S3ListPage> S3Client::ListPage(const std::string& continuation_token) const {
  std::vector<std::pair<std::string, std::string>> query = {
      {"list-type", "2"}, {"encoding-type", "url"}, {"prefix", location_.prefix}};
  if (!continuation_token.empty()) query.emplace_back("continuation-token", continuation_token);
  const std::string what =
      absl::StrCat("listing s3://", location_.bucket, "/", Printable(location_.prefix));
  absl::StatusOr<Reply> reply = Get(S3RequestUrl(location_, "", std::move(query)), {}, {}, what);
  if (!reply.ok()) return reply.status();
  absl::StatusOr<S3ListPage> page = ParseS3ListPage(reply->body);
  if (!page.ok()) {
    return absl::Status(page.status().code(), absl::StrCat("S3 endpoint ", location_.endpoint, " (",
                                                           what, "): ", page.status().message()));
  }
  return page;
}

absl::Status S3Client::GetRange(std::string_view key, std::string_view etag, uint64_t object_size,
                                uint64_t offset, std::span<char> out) const {
  if (out.empty()) return absl::OkStatus();
  const std::string what = absl::StrCat("GET s3://", location_.bucket, "/", Printable(key));
  std::vector<std::string> headers;
  if (offset != 0 || out.size() != object_size) {
    headers.push_back(absl::StrCat("Range: bytes=", offset, "-", offset + out.size() - 1));
  }
  if (!etag.empty()) headers.push_back(absl::StrCat("If-Match: ", AsAbsl(etag)));
  absl::StatusOr<Reply> reply = Get(S3RequestUrl(location_, key), headers, out, what);
  if (!reply.ok()) {
    if (absl::IsNotFound(reply.status())) {
      return absl::FailedPreconditionError(
          absl::StrCat(reply.status().message(), ": the object is gone since it was registered"));
    }
    if (absl::IsFailedPrecondition(reply.status())) {
      return absl::FailedPreconditionError(absl::StrCat(
          reply.status().message(), ": the object changed since it was registered (ETag ",
          Printable(etag), ")"));
    }
    return reply.status();
  }
  if (!etag.empty() && !reply->etag.empty() && reply->etag != etag) {
    return absl::FailedPreconditionError(
        absl::StrCat("S3 endpoint ", location_.endpoint, " (", what,
                     "): the object changed since it was registered (ETag ", Printable(etag),
                     ", now ", Printable(reply->etag), ")"));
  }
  if (reply->sink_bytes != out.size()) {
    return absl::DataLossError(absl::StrCat("S3 endpoint ", location_.endpoint, " (", what,
                                            "): answered ", reply->sink_bytes, " bytes of the ",
                                            out.size(), " asked for"));
  }
  return absl::OkStatus();
}

}  // namespace granary
