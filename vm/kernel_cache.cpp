// Kernel and KernelCache.
#include "vm/kernel_cache.h"

#include "dvm/error.h"

namespace dvm::vm {

Kernel::Kernel(Bytecode bc, VerifiedProgram vp)
    : bytecode_(std::move(bc)), hash_(bytecode_.hash()), vp_(std::move(vp)) {}

KernelCache& KernelCache::global() {
  static KernelCache cache;
  return cache;
}

std::shared_ptr<Kernel> KernelCache::get(const Bytecode& bc) {
  std::string key(bc.view());
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it != map_.end()) {
      hits_.fetch_add(1, std::memory_order_relaxed);
      return it->second;
    }
  }
  VerifiedProgram vp;
  std::string error;
  if (!verify(bc, &vp, &error)) throw Error(error);
  auto k = std::make_shared<Kernel>(bc, std::move(vp));
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = map_.emplace(std::move(key), k);
  if (inserted) misses_.fetch_add(1, std::memory_order_relaxed);
  else hits_.fetch_add(1, std::memory_order_relaxed);
  return it->second;
}

int64_t KernelCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(map_.size());
}

void KernelCache::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  map_.clear();
}

}  // namespace dvm::vm
