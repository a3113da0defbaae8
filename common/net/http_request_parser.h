// HttpRequestParser reads one HTTP/1.x request from bytes as they arrive, with
// limits: the request line and headers together at most `max_header_bytes`
// (else 431), the body at most `max_body_bytes` (else 413), refused from
// Content-Length before any of the body is read, and while decoding when it is
// chunked. Anything it cannot read safely is refused with 400: a malformed
// request line or header, a Content-Length that is not a number or is given
// twice with different values, Content-Length together with chunked (the
// ambiguity request smuggling relies on), a transfer coding other than
// chunked.
//
// The parser never buffers more than the limits allow: header bytes are taken
// only up to the limit, body bytes only as the body announced or decoded so far
// permits.
//
// Thread-safety: none; one parser per connection.
#ifndef GRANARY_COMMON_NET_HTTP_REQUEST_PARSER_H_
#define GRANARY_COMMON_NET_HTTP_REQUEST_PARSER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace granary {

struct HttpRequest {
  std::string method;
  std::string path;  // The target without its query.
  std::string body;
};

struct HttpParserLimits {
  size_t max_header_bytes = 16 << 10;
  size_t max_body_bytes = 1 << 20;
};

class HttpRequestParser {
 public:
  enum class Step {
    kNeedMore,  // Every byte given was consumed; the request is not complete.
    kComplete,  // The request is read; bytes after it are left in the input.
    kRefused,   // refusal_status() and refusal_message() say why.
  };

  explicit HttpRequestParser(HttpParserLimits limits);

  // Consumes bytes from the front of `input`, advancing it.
  Step Consume(std::string_view& input);

  // True once the request line and headers are read.
  bool headers_complete() const { return phase_ != Phase::kHead; }
  // The client sent "Expect: 100-continue" and waits for a 100 before the body.
  bool expects_continue() const { return expects_continue_; }
  // The body bytes the request will hold: its Content-Length, or for a chunked
  // body the bytes decoded so far plus the chunk being read.
  uint64_t body_bytes_announced() const { return body_announced_; }
  // Whether the connection may carry another request after this one.
  bool keep_alive() const { return keep_alive_; }

  int refusal_status() const { return refusal_status_; }
  const std::string& refusal_message() const { return refusal_message_; }

  // The request, once Consume returned kComplete.
  HttpRequest TakeRequest() { return std::move(request_); }

 private:
  enum class Phase { kHead, kBody, kChunkSize, kChunkData, kChunkDataEnd, kTrailers, kDone };

  Step Refuse(int status, std::string message);
  Step ConsumeHead(std::string_view& input);
  Step ParseHead();
  Step ConsumeChunked(std::string_view& input);
  enum class LineStep { kMore, kLine, kTooLong };
  // Takes one line, without its CRLF or LF, into line_ (kLine), or all of
  // `input` when the line goes on (kMore); kTooLong past `max_line` bytes.
  LineStep TakeLine(std::string_view& input, size_t max_line);

  HttpParserLimits limits_;
  Phase phase_ = Phase::kHead;
  std::string head_;
  size_t head_scanned_ = 0;
  std::string line_;
  uint64_t body_remaining_ = 0;
  uint64_t body_announced_ = 0;
  size_t trailer_bytes_ = 0;
  bool expects_continue_ = false;
  bool keep_alive_ = true;
  int refusal_status_ = 0;
  std::string refusal_message_;
  HttpRequest request_;
};

}  // namespace granary

#endif  // GRANARY_COMMON_NET_HTTP_REQUEST_PARSER_H_
