#include "cache_server/membership/etcd_membership.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cache_server/config/config.h"
#include "common/base/absl_compat.h"
#include "common/base/logging.h"
#include "common/base/status.h"
#include "common/net/server_address.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "proto/etcd.grpc.pb.h"

namespace granary {
namespace {

constexpr auto kRpcTimeout = std::chrono::seconds(5);
constexpr auto kRetryBackoff = std::chrono::milliseconds(500);

// The smallest key greater than every key with `prefix`: etcd's range_end for
// a prefix query.
std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    if (static_cast<unsigned char>(prefix.back()) < 0xff) {
      prefix.back() = static_cast<char>(prefix.back() + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');
}

void SetDeadline(grpc::ClientContext* context) {
  context->set_deadline(std::chrono::system_clock::now() + kRpcTimeout);
}

absl::Status EtcdError(const grpc::Status& status, std::string_view what,
                       std::string_view endpoint) {
  absl::Status error = FromGrpcStatus(status);
  return absl::Status(error.code(), absl::StrCat("etcd at ", AsAbsl(endpoint), ": ", AsAbsl(what),
                                                 ": ", error.message()));
}

}  // namespace

std::string EncodeMemberValue(const Member& member) {
  return nlohmann::json{
      {"address", member.address}, {"group", member.group}, {"weight", member.weight}}
      .dump();
}

absl::StatusOr<Member> DecodeMemberValue(std::string_view node_id, std::string_view value) {
  nlohmann::json json = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
  auto invalid = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd member '", AsAbsl(node_id), "': ", AsAbsl(why)));
  };
  if (!json.is_object()) return invalid("value is not a JSON object");
  Member member;
  member.id = std::string(node_id);
  if (!json.contains("address") || !json["address"].is_string()) {
    return invalid("no string 'address'");
  }
  member.address = json["address"].get<std::string>();
  if (json.contains("group")) {
    if (!json["group"].is_string()) return invalid("'group' is not a string");
    member.group = json["group"].get<std::string>();
  }
  if (json.contains("weight")) {
    if (!json["weight"].is_number_unsigned()) return invalid("'weight' is not a whole number");
    member.weight = json["weight"].get<uint32_t>();
  }
  if (member.id.empty() || member.group.empty() || member.weight < 1 || member.weight > 1000) {
    return invalid("empty id or group, or weight outside 1-1000");
  }
  return member;
}

absl::StatusOr<std::unique_ptr<EtcdMembership>> EtcdMembership::Start(Options options,
                                                                      MembershipListener listener) {
  std::string address = options.endpoint;
  if (absl::StartsWith(address, "http://")) address = address.substr(7);
  if (absl::StartsWith(options.endpoint, "https://")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "etcd endpoint '", options.endpoint, "': TLS endpoints are not supported; use http://"));
  }
  GRANARY_RETURN_IF_ERROR(ValidateHostPort("etcd endpoint", address));
  if (options.lease_ttl < std::chrono::seconds(1)) {
    return absl::InvalidArgumentError("etcd lease TTL must be at least 1 second");
  }
  GRANARY_ASSIGN_OR_RETURN(auto channel, MakeChannel(address));
  std::unique_ptr<EtcdMembership> membership(
      new EtcdMembership(std::move(options), std::move(listener), std::move(channel)));
  GRANARY_RETURN_IF_ERROR(membership->Register());
  GRANARY_ASSIGN_OR_RETURN(int64_t revision, membership->ReadAll());
  membership->keep_alive_thread_ = std::thread([m = membership.get()] { m->KeepAliveLoop(); });
  membership->watch_thread_ =
      std::thread([m = membership.get(), revision] { m->WatchLoop(revision + 1); });
  return membership;
}

EtcdMembership::EtcdMembership(Options options, MembershipListener listener,
                               std::shared_ptr<grpc::Channel> channel)
    : options_(std::move(options)), listener_(std::move(listener)), channel_(std::move(channel)) {}

EtcdMembership::~EtcdMembership() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
    for (grpc::ClientContext* context : live_calls_) context->TryCancel();
  }
  wake_.SignalAll();
  if (keep_alive_thread_.joinable()) keep_alive_thread_.join();
  if (watch_thread_.joinable()) watch_thread_.join();
  // Leave at once rather than after the TTL.
  int64_t lease = lease_id_;
  if (lease != 0) {
    grpc::ClientContext context;
    SetDeadline(&context);
    etcdserverpb::LeaseRevokeRequest request;
    request.set_id(lease);
    etcdserverpb::LeaseRevokeResponse response;
    grpc::Status status =
        etcdserverpb::Lease::NewStub(channel_)->LeaseRevoke(&context, request, &response);
    if (!status.ok()) {
      GRANARY_LOG(WARNING) << EtcdError(status, "revoking the lease", options_.endpoint);
    }
  }
}

absl::Status EtcdMembership::Register() {
  auto lease_stub = etcdserverpb::Lease::NewStub(channel_);
  grpc::ClientContext grant_context;
  SetDeadline(&grant_context);
  etcdserverpb::LeaseGrantRequest grant;
  grant.set_ttl(options_.lease_ttl.count());
  etcdserverpb::LeaseGrantResponse granted;
  grpc::Status status = lease_stub->LeaseGrant(&grant_context, grant, &granted);
  if (!status.ok()) return EtcdError(status, "granting a lease", options_.endpoint);
  if (!granted.error().empty()) {
    return absl::UnavailableError(
        absl::StrCat("etcd at ", options_.endpoint, ": granting a lease: ", granted.error()));
  }

  grpc::ClientContext put_context;
  SetDeadline(&put_context);
  etcdserverpb::PutRequest put;
  put.set_key(options_.prefix + options_.self.id);
  put.set_value(EncodeMemberValue(options_.self));
  put.set_lease(granted.id());
  etcdserverpb::PutResponse put_response;
  status = etcdserverpb::KV::NewStub(channel_)->Put(&put_context, put, &put_response);
  if (!status.ok()) return EtcdError(status, "registering this node", options_.endpoint);
  MutexLock lock(&mutex_);
  lease_id_ = granted.id();
  return absl::OkStatus();
}

void EtcdMembership::KeepAliveLoop() {
  auto stub = etcdserverpb::Lease::NewStub(channel_);
  const auto interval =
      std::chrono::duration_cast<std::chrono::milliseconds>(options_.lease_ttl) / 3;
  while (true) {
    grpc::ClientContext context;
    if (!Track(&context)) return;
    auto stream = stub->LeaseKeepAlive(&context);
    bool expired = false;
    while (true) {
      etcdserverpb::LeaseKeepAliveRequest request;
      {
        MutexLock lock(&mutex_);
        request.set_id(lease_id_);
      }
      etcdserverpb::LeaseKeepAliveResponse response;
      if (!stream->Write(request) || !stream->Read(&response)) break;
      if (response.ttl() <= 0) {
        expired = true;
        break;
      }
      if (SleepUnlessStopping(interval)) break;
    }
    stream->WritesDone();
    context.TryCancel();
    grpc::Status status = stream->Finish();
    Untrack(&context);
    if (expired) {
      GRANARY_LOG(WARNING) << "etcd lease of node " << options_.self.id
                           << " expired; registering again";
      absl::Status registered = Register();
      if (!registered.ok()) GRANARY_LOG(WARNING) << registered;
      continue;
    }
    if (SleepUnlessStopping(kRetryBackoff)) return;
    if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
      GRANARY_LOG(WARNING) << EtcdError(status, "keeping the lease alive", options_.endpoint);
    }
  }
}

absl::StatusOr<int64_t> EtcdMembership::ReadAll() {
  grpc::ClientContext context;
  SetDeadline(&context);
  etcdserverpb::RangeRequest request;
  request.set_key(options_.prefix);
  request.set_range_end(PrefixEnd(options_.prefix));
  etcdserverpb::RangeResponse response;
  grpc::Status status = etcdserverpb::KV::NewStub(channel_)->Range(&context, request, &response);
  if (!status.ok()) return EtcdError(status, "reading the members", options_.endpoint);
  std::map<std::string, Member> members;
  for (const etcdserverpb::KeyValue& kv : response.kvs()) Put(kv, &members);
  {
    MutexLock lock(&members_mutex_);
    members_ = std::move(members);
  }
  Report();
  return response.header().revision();
}

void EtcdMembership::Put(const etcdserverpb::KeyValue& kv,
                         std::map<std::string, Member>* members) const {
  std::string node_id = kv.key().substr(options_.prefix.size());
  auto member = DecodeMemberValue(node_id, kv.value());
  if (member.ok()) {
    (*members)[node_id] = *std::move(member);
  } else {
    GRANARY_LOG(WARNING) << member.status() << "; leaving it out";
    members->erase(node_id);
  }
}

void EtcdMembership::WatchLoop(int64_t start_revision) {
  auto stub = etcdserverpb::Watch::NewStub(channel_);
  while (true) {
    grpc::ClientContext context;
    if (!Track(&context)) return;
    auto stream = stub->Watch(&context);
    etcdserverpb::WatchRequest request;
    request.mutable_create_request()->set_key(options_.prefix);
    request.mutable_create_request()->set_range_end(PrefixEnd(options_.prefix));
    request.mutable_create_request()->set_start_revision(start_revision);
    etcdserverpb::WatchResponse response;
    bool wrote = stream->Write(request);
    while (wrote && stream->Read(&response)) {
      if (response.canceled()) break;
      if (response.events().empty()) continue;
      {
        MutexLock lock(&members_mutex_);
        for (const etcdserverpb::Event& event : response.events()) {
          if (event.type() == etcdserverpb::Event::DELETE) {
            members_.erase(event.kv().key().substr(options_.prefix.size()));
          } else {
            Put(event.kv(), &members_);
          }
        }
      }
      start_revision = response.header().revision() + 1;
      Report();
    }
    context.TryCancel();
    grpc::Status status = stream->Finish();
    Untrack(&context);
    if (SleepUnlessStopping(kRetryBackoff)) return;
    if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
      GRANARY_LOG(WARNING) << EtcdError(status, "watching the members", options_.endpoint);
    }
    // Changes may have been missed while the stream was down: start over.
    auto revision = ReadAll();
    if (revision.ok()) {
      start_revision = *revision + 1;
    } else {
      GRANARY_LOG(WARNING) << revision.status();
    }
  }
}

void EtcdMembership::Report() {
  MutexLock lock(&members_mutex_);
  std::vector<Member> members;
  members.reserve(members_.size());
  for (const auto& [id, member] : members_) members.push_back(member);
  listener_(std::move(members));
}

bool EtcdMembership::SleepUnlessStopping(std::chrono::milliseconds duration) {
  MutexLock lock(&mutex_);
  return wake_.WaitFor(&mutex_, duration,
                       [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) { return stopping_; });
}

bool EtcdMembership::Track(grpc::ClientContext* context) {
  MutexLock lock(&mutex_);
  if (stopping_) return false;
  live_calls_.push_back(context);
  return true;
}

void EtcdMembership::Untrack(grpc::ClientContext* context) {
  MutexLock lock(&mutex_);
  live_calls_.erase(std::find(live_calls_.begin(), live_calls_.end(), context));
}

}  // namespace granary
