#include "common/base/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace granary {

void ParallelFor(size_t count, size_t max_threads, const std::function<void(size_t)>& fn) {
  if (count == 0) return;
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) fn(i);
  };
  std::vector<std::thread> threads;
  size_t extra = std::min(count, std::max<size_t>(max_threads, 1)) - 1;
  for (size_t t = 0; t < extra; ++t) threads.emplace_back(work);
  work();
  for (std::thread& thread : threads) thread.join();
}

}  // namespace granary
