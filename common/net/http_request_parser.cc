#include "common/net/http_request_parser.h"

#include <algorithm>
#include <charconv>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/base/absl_compat.h"

namespace granary {
namespace {

// A chunk-size line is a hex number and optional extensions; no client needs
// more, and a longer one is someone probing for a buffer.
constexpr size_t kMaxChunkSizeLine = 1024;
// 2^60: larger sizes are refused before any arithmetic on them can overflow.
constexpr size_t kMaxDecimalDigits = 18;
constexpr size_t kMaxHexDigits = 15;

std::string_view Trim(std::string_view text) {
  return AsStd(absl::StripAsciiWhitespace(AsAbsl(text)));
}

std::string Lower(std::string_view text) { return absl::AsciiStrToLower(AsAbsl(text)); }

bool IsToken(std::string_view text) {
  return !text.empty() && std::ranges::all_of(text, [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  });
}

}  // namespace

HttpRequestParser::HttpRequestParser(HttpParserLimits limits) : limits_(limits) {}

HttpRequestParser::Step HttpRequestParser::Refuse(int status, std::string message) {
  refusal_status_ = status;
  refusal_message_ = std::move(message);
  keep_alive_ = false;
  return Step::kRefused;
}

HttpRequestParser::Step HttpRequestParser::Consume(std::string_view& input) {
  if (refusal_status_ != 0) return Step::kRefused;
  if (phase_ == Phase::kHead) {
    Step step = ConsumeHead(input);
    if (step == Step::kRefused || phase_ == Phase::kHead) return step;
  }
  if (phase_ == Phase::kBody) {
    size_t take = static_cast<size_t>(std::min<uint64_t>(body_remaining_, input.size()));
    request_.body.append(input.substr(0, take));
    input.remove_prefix(take);
    body_remaining_ -= take;
    if (body_remaining_ > 0) return Step::kNeedMore;
    phase_ = Phase::kDone;
  }
  if (phase_ != Phase::kDone) return ConsumeChunked(input);
  return Step::kComplete;
}

HttpRequestParser::Step HttpRequestParser::ConsumeHead(std::string_view& input) {
  // Empty lines before a request line are allowed (RFC 9112 2.2).
  if (head_.empty()) {
    while (!input.empty() && (input.front() == '\r' || input.front() == '\n')) {
      input.remove_prefix(1);
    }
  }
  const size_t before = head_.size();
  const size_t take = std::min(input.size(), limits_.max_header_bytes - before);
  head_.append(input.substr(0, take));
  const size_t from = head_scanned_ > 2 ? head_scanned_ - 2 : 0;
  size_t end = std::string::npos;
  if (size_t crlf = head_.find("\n\r\n", from); crlf != std::string::npos) end = crlf + 3;
  if (size_t lf = head_.find("\n\n", from); lf != std::string::npos) end = std::min(end, lf + 2);
  if (end == std::string::npos) {
    input.remove_prefix(take);
    head_scanned_ = head_.size();
    if (head_.size() >= limits_.max_header_bytes) {
      return Refuse(431, absl::StrCat("request line and headers exceed the limit of ",
                                      limits_.max_header_bytes, " bytes"));
    }
    return Step::kNeedMore;
  }
  input.remove_prefix(end - before);
  head_.resize(end);
  return ParseHead();
}

HttpRequestParser::Step HttpRequestParser::ParseHead() {
  std::vector<std::string_view> lines;
  std::string_view rest(head_);
  while (!rest.empty()) {
    size_t newline = rest.find('\n');
    std::string_view line = rest.substr(0, newline);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) break;
    lines.push_back(line);
    rest.remove_prefix(newline + 1);
  }
  if (lines.empty()) return Refuse(400, "empty request");

  std::string_view request_line = lines[0];
  size_t first = request_line.find(' ');
  size_t second = first == std::string_view::npos ? first : request_line.find(' ', first + 1);
  if (second == std::string_view::npos) {
    return Refuse(400, "malformed request line (METHOD TARGET HTTP/1.x)");
  }
  std::string_view method = request_line.substr(0, first);
  std::string_view target = request_line.substr(first + 1, second - first - 1);
  std::string_view version = request_line.substr(second + 1);
  if (!IsToken(method) || target.empty() || target.front() != '/') {
    return Refuse(400, "malformed request line (METHOD TARGET HTTP/1.x)");
  }
  if (version == "HTTP/1.1") {
    keep_alive_ = true;
  } else if (version == "HTTP/1.0") {
    keep_alive_ = false;
  } else {
    return Refuse(505, "only HTTP/1.0 and HTTP/1.1 are served");
  }
  request_.method = method;
  request_.path = target.substr(0, target.find('?'));

  bool chunked = false;
  bool has_length = false;
  uint64_t length = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    if (line.front() == ' ' || line.front() == '\t') {
      return Refuse(400, "header line folding is not accepted (RFC 9112 5.2)");
    }
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || !IsToken(line.substr(0, colon))) {
      return Refuse(400, "malformed header line");
    }
    std::string name = Lower(line.substr(0, colon));
    std::string_view value = Trim(line.substr(colon + 1));
    if (name == "content-length") {
      uint64_t parsed = 0;
      if (value.empty() || value.size() > kMaxDecimalDigits ||
          !std::ranges::all_of(value, [](char c) { return c >= '0' && c <= '9'; }) ||
          !absl::SimpleAtoi(AsAbsl(value), &parsed)) {
        return Refuse(400, "Content-Length is not a number of at most 18 digits");
      }
      if (has_length && parsed != length) {
        return Refuse(400, "Content-Length is given twice with different values");
      }
      has_length = true;
      length = parsed;
    } else if (name == "transfer-encoding") {
      if (Lower(value) != "chunked") {
        return Refuse(501, absl::StrCat("Transfer-Encoding '", AsAbsl(value),
                                        "' is not served; only chunked is"));
      }
      chunked = true;
    } else if (name == "connection") {
      std::string options = Lower(value);
      if (absl::StrContains(options, "close")) keep_alive_ = false;
      if (absl::StrContains(options, "keep-alive")) keep_alive_ = true;
    } else if (name == "expect") {
      expects_continue_ = Lower(value) == "100-continue";
    }
  }
  if (chunked && has_length) {
    return Refuse(400, "a request may not carry both Content-Length and Transfer-Encoding");
  }
  if (chunked) {
    phase_ = Phase::kChunkSize;
    return Step::kNeedMore;
  }
  if (length > limits_.max_body_bytes) {
    return Refuse(413, absl::StrCat("request body of ", length, " bytes exceeds the limit of ",
                                    limits_.max_body_bytes, " bytes"));
  }
  body_announced_ = length;
  body_remaining_ = length;
  request_.body.reserve(length);
  phase_ = length > 0 ? Phase::kBody : Phase::kDone;
  return Step::kNeedMore;
}

HttpRequestParser::LineStep HttpRequestParser::TakeLine(std::string_view& input, size_t max_line) {
  size_t newline = input.find('\n');
  size_t take = newline == std::string_view::npos ? input.size() : newline;
  if (line_.size() + take > max_line) return LineStep::kTooLong;
  line_.append(input.substr(0, take));
  if (newline == std::string_view::npos) {
    input.remove_prefix(take);
    return LineStep::kMore;
  }
  input.remove_prefix(newline + 1);
  if (!line_.empty() && line_.back() == '\r') line_.pop_back();
  return LineStep::kLine;
}

HttpRequestParser::Step HttpRequestParser::ConsumeChunked(std::string_view& input) {
  while (phase_ != Phase::kDone) {
    if (phase_ == Phase::kChunkData) {
      size_t take = static_cast<size_t>(std::min<uint64_t>(body_remaining_, input.size()));
      request_.body.append(input.substr(0, take));
      input.remove_prefix(take);
      body_remaining_ -= take;
      if (body_remaining_ > 0) return Step::kNeedMore;
      phase_ = Phase::kChunkDataEnd;
      continue;
    }
    const size_t max_line =
        phase_ == Phase::kTrailers ? limits_.max_header_bytes : kMaxChunkSizeLine;
    LineStep line = TakeLine(input, max_line);
    if (line == LineStep::kMore) return Step::kNeedMore;
    if (line == LineStep::kTooLong) {
      return phase_ == Phase::kTrailers
                 ? Refuse(431, absl::StrCat("request trailers exceed the limit of ",
                                            limits_.max_header_bytes, " bytes"))
                 : Refuse(400, "chunk size line too long");
    }
    std::string text = std::exchange(line_, std::string());
    if (phase_ == Phase::kChunkDataEnd) {
      if (!text.empty()) return Refuse(400, "chunk data is not followed by CRLF");
      phase_ = Phase::kChunkSize;
    } else if (phase_ == Phase::kTrailers) {
      trailer_bytes_ += text.size() + 2;
      if (trailer_bytes_ > limits_.max_header_bytes) {
        return Refuse(431, absl::StrCat("request trailers exceed the limit of ",
                                        limits_.max_header_bytes, " bytes"));
      }
      if (text.empty()) phase_ = Phase::kDone;
    } else {
      std::string_view digits = Trim(std::string_view(text).substr(0, text.find(';')));
      uint64_t size = 0;
      if (digits.empty() || digits.size() > kMaxHexDigits ||
          std::from_chars(digits.data(), digits.data() + digits.size(), size, 16).ptr !=
              digits.data() + digits.size()) {
        return Refuse(400, "malformed chunk size");
      }
      if (size > limits_.max_body_bytes - request_.body.size()) {
        return Refuse(413, absl::StrCat("chunked request body exceeds the limit of ",
                                        limits_.max_body_bytes, " bytes"));
      }
      if (size == 0) {
        phase_ = Phase::kTrailers;
      } else {
        body_remaining_ = size;
        body_announced_ = request_.body.size() + size;
        // Grown geometrically but never past the limit, so that a body at the
        // limit holds no more than the limit.
        if (body_announced_ > request_.body.capacity()) {
          request_.body.reserve(static_cast<size_t>(
              std::min<uint64_t>(std::max<uint64_t>(body_announced_, 2 * request_.body.capacity()),
                                 limits_.max_body_bytes)));
        }
        phase_ = Phase::kChunkData;
      }
    }
  }
  return Step::kComplete;
}

}  // namespace granary
