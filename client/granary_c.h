/* The C ABI of libgranary (client/granary_client.h), for programs and
 * languages that cannot use its C++ API: connect to the node's granaryd,
 * read a batch of whole files of a dataset, free what it returned.
 *
 * Every function that can fail returns 0 on success and an absl status code
 * otherwise (5 not found, 7 permission denied, 14 unavailable, ...), with a
 * message in *error (free it with granary_free) when `error` is not NULL.
 *
 * Thread-safety: a granary_client may be used from several threads at once;
 * granary_close must be the last call on it. */
#ifndef GRANARY_CLIENT_GRANARY_C_H_
#define GRANARY_CLIENT_GRANARY_C_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GRANARY_EXPORT __attribute__((visibility("default")))

typedef struct granary_client granary_client;

/* `socket_path` NULL: $GRANARY_SOCKET, else the node's granaryd (common/net/defaults.h). */
GRANARY_EXPORT int granary_connect(const char* socket_path, granary_client** client, char** error);
GRANARY_EXPORT void granary_close(granary_client* client);

/* Reads `count` whole files of `dataset` (its current version). For each
 * file i, codes[i] is its own status code; when it is 0, data[i] holds its
 * sizes[i] bytes (free with granary_free), else errors[i] says why. The
 * return value is the batch's own status: an unknown dataset, no granaryd. */
GRANARY_EXPORT int granary_read_many(granary_client* client, const char* dataset,
                                     const char* const* paths, size_t count, char** data,
                                     size_t* sizes, int* codes, char** errors, char** error);

GRANARY_EXPORT void granary_free(void* pointer);

#ifdef __cplusplus
}
#endif

#endif /* GRANARY_CLIENT_GRANARY_C_H_ */
