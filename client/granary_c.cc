#include "client/granary_c.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "client/granary_client.h"

struct granary_client {
  std::unique_ptr<granary::GranaryClient> client;
};

namespace {

char* CopyOf(std::string_view text) {
  char* copy = static_cast<char*>(std::malloc(text.size() + 1));
  if (copy == nullptr) return nullptr;
  std::memcpy(copy, text.data(), text.size());
  copy[text.size()] = '\0';
  return copy;
}

int Fail(const absl::Status& status, char** error) {
  if (error != nullptr) *error = CopyOf(std::string(status.message()));
  return static_cast<int>(status.code());
}

}  // namespace

extern "C" int granary_connect(const char* socket_path, granary_client** client, char** error) {
  absl::StatusOr<std::unique_ptr<granary::GranaryClient>> connected =
      granary::GranaryClient::Connect({.socket_path = socket_path ? socket_path : ""});
  if (!connected.ok()) return Fail(connected.status(), error);
  *client = new granary_client{std::move(*connected)};
  return 0;
}

extern "C" void granary_close(granary_client* client) { delete client; }

extern "C" int granary_read_many(granary_client* client, const char* dataset,
                                 const char* const* paths, size_t count, char** data, size_t* sizes,
                                 int* codes, char** errors, char** error) {
  std::vector<std::string> named(paths, paths + count);
  absl::StatusOr<granary::GranaryClient::OpenedBatch> batch =
      client->client->OpenMany(dataset, named);
  if (!batch.ok()) return Fail(batch.status(), error);
  std::vector<char*> outs(count, nullptr);
  for (size_t i = 0; i < count; ++i) {
    granary::GranaryClient::OpenedFile& file = batch->files[i];
    if (!file.status.ok()) continue;
    // One byte more, so that an empty file gets a pointer of its own.
    outs[i] = static_cast<char*>(std::malloc(file.size + 1));
    if (outs[i] == nullptr) file.status = absl::ResourceExhaustedError("out of memory");
  }
  client->client->ReadOpened(*batch, outs);
  for (size_t i = 0; i < count; ++i) {
    const absl::Status& status = batch->files[i].status;
    codes[i] = static_cast<int>(status.code());
    sizes[i] = status.ok() ? batch->files[i].size : 0;
    errors[i] = status.ok() ? nullptr : CopyOf(std::string(status.message()));
    if (!status.ok()) {
      std::free(outs[i]);
      outs[i] = nullptr;
    }
    data[i] = outs[i];
  }
  return 0;
}

extern "C" void granary_free(void* pointer) { std::free(pointer); }
