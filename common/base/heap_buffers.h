// How a Granary process keeps the large buffers it allocates and frees at
// the read rate (chunks, blocks, batches of files): in the heap, for the next
// read to reuse. glibc's defaults map each allocation of 128 KiB or more
// afresh and unmap it when freed, and trim the heap's top past 128 KiB, so
// every read's buffers would fault their pages in again, zeroed by the
// kernel, at more CPU than the copies into them.
//
// Contract: allocations up to 64 MiB then come from the heap, and up to
// 256 MiB freed at a heap's top stays there; what stays is bounded by the
// buffers in use at once. Settings the user gave glibc through its
// environment (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_,
// GLIBC_TUNABLES) are left as they are.
//
// Thread-safety: call once, early in main() or a module's initialisation,
// before threads allocate large buffers.
#ifndef GRANARY_COMMON_BASE_HEAP_BUFFERS_H_
#define GRANARY_COMMON_BASE_HEAP_BUFFERS_H_

namespace granary {

void KeepLargeBuffersInTheHeap();

}  // namespace granary

#endif  // GRANARY_COMMON_BASE_HEAP_BUFFERS_H_
