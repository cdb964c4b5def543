// Plan cache: plans by structural signature.
#include "fuser/plan_cache.h"

namespace dvm::fuser {

namespace {
constexpr size_t kMaxPlans = 1024;
}  // namespace

PlanCache& PlanCache::current() {
  thread_local PlanCache c;
  return c;
}

const CachedPlan* PlanCache::find(const Signature& sig) const {
  auto [lo, hi] = entries_.equal_range(sig.hash);
  for (auto it = lo; it != hi; ++it)
    if (it->second.sig.words == sig.words) return &it->second.plan;
  return nullptr;
}

const CachedPlan& PlanCache::insert(Signature sig, CachedPlan plan) {
  if (entries_.size() >= kMaxPlans) entries_.clear();  // rare: a program with very many structures
  uint64_t h = sig.hash;
  return entries_.emplace(h, Entry{std::move(sig), std::move(plan)})->second.plan;
}

}  // namespace dvm::fuser
