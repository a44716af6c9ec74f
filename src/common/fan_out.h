// FanOut: several calls at once, their results in order. The leader's observations and orders
// (control/env.h's `parallel`) and the node's start view use it; the deterministic simulation
// passes parallel=false and gets every call in order on its one thread.
#pragma once

#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <vector>

#include "common/thread_cache.h"

namespace steward {

// Runs each call and returns the results in order: concurrently when `parallel`.
template <typename T>
std::vector<T> FanOut(bool parallel, const std::vector<std::function<T()>>& calls) {
  std::vector<T> results;
  results.reserve(calls.size());
  if (!parallel) {
    for (const auto& c : calls) results.push_back(c());
    return results;
  }
  if (calls.empty()) return results;
  // The last call runs on this thread, the others on threads kept from earlier fan-outs
  // (common/thread_cache.h): an idle leader starts no thread per pass.
  std::vector<std::future<T>> futures;
  futures.reserve(calls.size() - 1);
  for (size_t i = 0; i + 1 < calls.size(); ++i) {
    auto task = std::make_shared<std::packaged_task<T()>>(calls[i]);
    futures.push_back(task->get_future());
    ThreadCache::Global().Run([task] { (*task)(); });
  }
  // Every call has ended before this returns, also when one failed (as std::async's futures
  // would wait): a call left running could outlive what it refers to.
  std::optional<T> last;
  std::exception_ptr failed;
  try {
    last.emplace(calls.back()());
  } catch (...) {
    failed = std::current_exception();
  }
  for (auto& f : futures) f.wait();
  if (failed) std::rethrow_exception(failed);
  for (auto& f : futures) results.push_back(f.get());
  results.push_back(std::move(*last));
  return results;
}

}  // namespace steward
