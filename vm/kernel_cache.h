// The kernel cache: bytecode -> verified kernel. The key is the bytecode
// itself, so concrete sizes can never cause a new entry.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <list>
#include <vector>

#include "vm/kernel.h"

namespace dvm::vm {

class KernelCache {
 public:
  static KernelCache& global();

  // The kernel for bc, verifying and inserting it on first sight. Throws
  // dvm::Error with the verifier's message for malformed bytecode. *fresh,
  // when given, tells whether this call inserted it (a cache miss).
  std::shared_ptr<Kernel> get(const Bytecode& bc, bool* fresh = nullptr);

  int64_t size() const;
  // Every cached kernel (for statistics).
  std::vector<std::shared_ptr<Kernel>> snapshot() const;
  // At most this many kernels stay cached (default 4096); beyond it the
  // least recently used (launched or fetched) are evicted, and their
  // machine code is freed once no launch uses them.
  void set_capacity(int64_t kernels);
  int64_t capacity() const;
  int64_t evictions() const { return evictions_.load(std::memory_order_relaxed); }
  int64_t hits() const { return hits_.load(std::memory_order_relaxed); }
  int64_t misses() const { return misses_.load(std::memory_order_relaxed); }
  void clear();

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<Kernel>> map_;
  std::list<std::string> order_;  // insertion order, oldest first (for snapshot)
  int64_t capacity_;
  void evict_to_capacity();  // with mu_ held
  std::atomic<int64_t> hits_{0}, misses_{0}, evictions_{0};

 public:
  KernelCache();
};

}  // namespace dvm::vm
