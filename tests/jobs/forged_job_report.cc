// forged_job_report SOCKET: reports a made-up job's reads to the granaryd
// listening on Unix socket SOCKET, as whoever runs it, and prints the answer's
// status; exit status 0 when granaryd refused it with PERMISSION_DENIED.
// The mount test runs it as an unprivileged user.
#include <cstdio>
#include <string>

#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "proto/jobs.grpc.pb.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: forged_job_report SOCKET\n");
    return 2;
  }
  auto stub = granary::v1::Jobs::NewStub(
      grpc::CreateChannel(std::string("unix:") + argv[1], grpc::InsecureChannelCredentials()));
  granary::v1::JobReadsReport report;
  granary::v1::JobReads* forged = report.add_jobs();
  forged->set_job("slurm:1");
  forged->set_dataset("ds");
  forged->set_files_opened(1'000'000);
  grpc::ClientContext context;
  granary::v1::ReportJobReadsResponse response;
  const grpc::Status status = stub->ReportJobReads(&context, report, &response);
  std::printf("%d %s\n", static_cast<int>(status.error_code()), status.error_message().c_str());
  return status.error_code() == grpc::StatusCode::PERMISSION_DENIED ? 0 : 1;
}
