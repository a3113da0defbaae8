#include "common/jobs/read_origin.h"

#include <algorithm>

namespace granary {
namespace {

thread_local ReadOriginScope* current_scope = nullptr;

}  // namespace

std::string_view ReadOriginName(ReadOrigin origin) {
  switch (origin) {
    case ReadOrigin::kMemory:
      return "memory";
    case ReadOrigin::kPassthrough:
      return "passthrough";
    case ReadOrigin::kLocal:
      return "local";
    case ReadOrigin::kPeer:
      return "peer";
    case ReadOrigin::kSource:
      return "source";
  }
  return "unknown";
}

ReadOriginScope::ReadOriginScope() : outer_(current_scope) { current_scope = this; }

ReadOriginScope::~ReadOriginScope() { current_scope = outer_; }

std::optional<ReadOrigin> ReadOriginScope::slowest() const {
  if (slowest_ < 0) return std::nullopt;
  return static_cast<ReadOrigin>(slowest_);
}

void NoteReadOrigin(ReadOrigin origin) {
  if (current_scope == nullptr) return;
  current_scope->slowest_ = std::max(current_scope->slowest_, static_cast<int>(origin));
}

}  // namespace granary
