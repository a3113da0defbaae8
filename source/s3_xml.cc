#include "source/s3_xml.h"

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <time.h>

#include <charconv>
#include <memory>
#include <mutex>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/base/absl_compat.h"
#include "common/base/printable.h"
#include "common/source_access/s3_location.h"

namespace granary {
namespace {

struct DocumentFree {
  void operator()(xmlDoc* document) const { xmlFreeDoc(document); }
};
using Document = std::unique_ptr<xmlDoc, DocumentFree>;

Document Parse(std::string_view xml) {
  static std::once_flag initialised;
  std::call_once(initialised, [] { xmlInitParser(); });
  return Document(xmlReadMemory(xml.data(), static_cast<int>(xml.size()), nullptr, nullptr,
                                XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING));
}

bool Named(const xmlNode* node, std::string_view name) {
  return node->type == XML_ELEMENT_NODE &&
         std::string_view(reinterpret_cast<const char*>(node->name)) == name;
}

std::string Text(const xmlNode* node) {
  xmlChar* content = xmlNodeGetContent(node);
  if (content == nullptr) return "";
  std::string text(reinterpret_cast<const char*>(content));
  xmlFree(content);
  return text;
}

const xmlNode* Child(const xmlNode* parent, std::string_view name) {
  for (const xmlNode* child = parent->children; child != nullptr; child = child->next) {
    if (Named(child, name)) return child;
  }
  return nullptr;
}

std::string ChildText(const xmlNode* parent, std::string_view name) {
  const xmlNode* child = Child(parent, name);
  return child == nullptr ? "" : Text(child);
}

// "2026-12-02T03:54:52.123Z" (ISO 8601 in UTC, as S3 writes it).
bool ParseTimestamp(const std::string& text, int64_t* ns) {
  struct tm parts {};
  const char* rest = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &parts);
  if (rest == nullptr) return false;
  int64_t fraction_ns = 0;
  if (*rest == '.') {
    int64_t scale = 100'000'000;
    for (++rest; *rest >= '0' && *rest <= '9'; ++rest, scale /= 10) {
      fraction_ns += (*rest - '0') * scale;
    }
  }
  if (std::string_view(rest) != "Z") return false;
  *ns = static_cast<int64_t>(timegm(&parts)) * 1'000'000'000 + fraction_ns;
  return true;
}

absl::Status Malformed(std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed ListObjectsV2 reply: ", AsAbsl(what)));
}

}  // namespace

absl::StatusOr<S3ListPage> ParseS3ListPage(std::string_view xml) {
  Document document = Parse(xml);
  const xmlNode* root = document ? xmlDocGetRootElement(document.get()) : nullptr;
  if (root == nullptr) return Malformed("not an XML document");
  if (!Named(root, "ListBucketResult")) {
    return Malformed(absl::StrCat("root element is <",
                                  Printable(reinterpret_cast<const char*>(root->name)),
                                  ">, not <ListBucketResult>"));
  }
  const bool url_encoded = ChildText(root, "EncodingType") == "url";
  S3ListPage page;
  for (const xmlNode* node = root->children; node != nullptr; node = node->next) {
    if (!Named(node, "Contents")) continue;
    S3Object object;
    const xmlNode* key = Child(node, "Key");
    if (key == nullptr) return Malformed("a <Contents> has no <Key>");
    object.key = Text(key);
    if (url_encoded) {
      std::optional<std::string> decoded = S3UriDecode(object.key, /*plus_is_space=*/true);
      if (!decoded) {
        return Malformed(absl::StrCat("key '", Printable(object.key), "' is not URL-encoded"));
      }
      object.key = *std::move(decoded);
    }
    const std::string size = ChildText(node, "Size");
    auto [end, error] = std::from_chars(size.data(), size.data() + size.size(), object.size);
    if (size.empty() || error != std::errc() || end != size.data() + size.size()) {
      return Malformed(
          absl::StrCat("key '", Printable(object.key), "' has size '", Printable(size), "'"));
    }
    object.etag = ChildText(node, "ETag");
    const std::string modified = ChildText(node, "LastModified");
    if (!ParseTimestamp(modified, &object.last_modified_ns)) {
      return Malformed(absl::StrCat("key '", Printable(object.key), "' has LastModified '",
                                    Printable(modified), "'"));
    }
    page.objects.push_back(std::move(object));
  }
  if (ChildText(root, "IsTruncated") == "true") {
    page.next_continuation_token = ChildText(root, "NextContinuationToken");
    if (page.next_continuation_token.empty()) {
      return Malformed("a truncated page has no NextContinuationToken");
    }
  }
  return page;
}

std::string S3ErrorSummary(std::string_view xml) {
  Document document = Parse(xml);
  const xmlNode* root = document ? xmlDocGetRootElement(document.get()) : nullptr;
  if (root == nullptr || !Named(root, "Error")) return "";
  return absl::StrCat(Printable(ChildText(root, "Code")), ": ",
                      Printable(ChildText(root, "Message")));
}

}  // namespace granary
