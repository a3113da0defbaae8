#include "fuse_client/jobs/job_reporter.h"

#include "common/base/logging.h"
#include "common/base/status.h"
#include "grpcpp/client_context.h"

namespace granary::fuse {

namespace {

// How long one report may take: a granaryd that does not answer costs the
// reporter's thread this, never a reader.
constexpr std::chrono::seconds kReportDeadline{5};

}  // namespace

JobReporter::JobReporter(JobLedger* ledger, std::shared_ptr<grpc::Channel> granaryd,
                         std::chrono::milliseconds interval)
    : ledger_(ledger),
      stub_(v1::Jobs::NewStub(std::move(granaryd))),
      reports_(std::make_unique<PeriodicThread>(interval, interval, [this] { SendPending(); })) {}

JobReporter::~JobReporter() {
  reports_.reset();
  SendPending();
}

void JobReporter::SendPending() {
  const v1::JobReadsReport pending = ledger_->TakeReport();
  if (pending.jobs().empty()) return;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kReportDeadline);
  v1::ReportJobReadsResponse response;
  const absl::Status sent = FromGrpcStatus(stub_->ReportJobReads(&context, pending, &response));
  if (!sent.ok()) {
    GRANARY_LOG_FIRST_N(WARNING, 10) << "cannot report jobs' reads to granaryd: " << sent;
  }
}

}  // namespace granary::fuse
