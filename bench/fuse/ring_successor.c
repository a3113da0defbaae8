/* A successor on a FUSE connection served over io_uring, for
 * ring_restart_probe.py: on the connection it inherits as descriptor argv[1],
 * it registers one ring entry on each of the argv[2] queues (one per possible
 * CPU, as the kernel requires), answers every request that arrives ENOENT,
 * prints each one, and leaves when none has come for three seconds.
 *
 * The layouts are those of the kernel's uapi <linux/fuse.h> (7.42), which
 * Debian 12's headers predate. */
#include <liburing.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

struct ent_in_out { /* struct fuse_uring_ent_in_out */
  uint64_t flags, commit_id;
  uint32_t payload_sz, padding;
  uint64_t reserved;
};
struct req_header { /* struct fuse_uring_req_header */
  char in_out[128];
  char op_in[128];
  struct ent_in_out ent;
};
struct cmd_req { /* struct fuse_uring_cmd_req */
  uint64_t flags, commit_id;
  uint16_t qid;
  uint8_t padding[6];
};
struct in_header { /* the start of struct fuse_in_header */
  uint32_t len, opcode;
  uint64_t unique;
};
struct out_header { /* struct fuse_out_header */
  uint32_t len;
  int32_t error;
  uint64_t unique;
};

enum { kMaxQueues = 64, kPayloadBytes = 16 << 20, kRegister = 1, kCommitAndFetch = 2 };

static struct req_header headers[kMaxQueues];
static struct iovec buffers[kMaxQueues][2];

static void Submit(struct io_uring* ring, int fuse_fd, int qid, uint32_t command,
                   uint64_t commit_id) {
  struct io_uring_sqe* sqe = io_uring_get_sqe(ring);
  /* With IORING_SETUP_SQE128 an entry spans two slots, the second holding
   * the command: addressed as bytes, which the compiler cannot bound by the
   * 64-byte struct. */
  char* slot = (char*)(uintptr_t)sqe;
  __asm__("" : "+r"(slot));
  memset(slot, 0, 2 * sizeof(*sqe));
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = fuse_fd;
  sqe->cmd_op = command;
  sqe->addr = (uint64_t)(uintptr_t)buffers[qid];
  sqe->len = 2;
  sqe->user_data = (uint64_t)qid;
  const struct cmd_req request = {.commit_id = commit_id, .qid = (uint16_t)qid};
  memcpy(slot + offsetof(struct io_uring_sqe, cmd), &request, sizeof(request));
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s FUSE_FD QUEUES\n", argv[0]);
    return 2;
  }
  const int fuse_fd = atoi(argv[1]);
  const int queues = atoi(argv[2]);
  if (queues < 1 || queues > kMaxQueues) return 2;
  struct io_uring ring;
  int rc = io_uring_queue_init(2 * kMaxQueues, &ring, IORING_SETUP_SQE128);
  if (rc != 0) {
    printf("io_uring_queue_init: %s\n", strerror(-rc));
    return 1;
  }
  for (int q = 0; q < queues; ++q) {
    buffers[q][0] = (struct iovec){&headers[q], sizeof(headers[q])};
    buffers[q][1] = (struct iovec){malloc(kPayloadBytes), kPayloadBytes};
    Submit(&ring, fuse_fd, q, kRegister, 0);
  }
  printf("registered an entry on each of %d queues\n", io_uring_submit(&ring));
  fflush(stdout);
  for (;;) {
    struct io_uring_cqe* cqe;
    struct __kernel_timespec timeout = {.tv_sec = 3};
    if (io_uring_wait_cqe_timeout(&ring, &cqe, &timeout) != 0) break;
    const int q = (int)cqe->user_data;
    const int result = cqe->res;
    io_uring_cqe_seen(&ring, cqe);
    if (result != 0) {
      printf("queue %d: %s\n", q, strerror(-result));
      continue;
    }
    struct in_header in;
    memcpy(&in, headers[q].in_out, sizeof(in));
    printf("queue %d: request opcode %u, unique %llu\n", q, in.opcode,
           (unsigned long long)in.unique);
    fflush(stdout);
    const struct out_header out = {
        .len = sizeof(out), .error = -2 /* ENOENT */, .unique = in.unique};
    memcpy(headers[q].in_out, &out, sizeof(out));
    headers[q].ent.payload_sz = 0;
    Submit(&ring, fuse_fd, q, kCommitAndFetch, headers[q].ent.commit_id);
    io_uring_submit(&ring);
  }
  return 0;
}
