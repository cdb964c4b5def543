// Plan cache: a flushed trace whose structure was seen before reuses its
// fusion plan and kernels without running the partition or the encoder.
// Structures are told apart by their signatures (tracer/signature.h), which
// the trace builds as it records.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "tracer/node.h"
#include "tracer/signature.h"
#include "vm/bytecode.h"
#include "fuser/lower.h"
#include "vm/kernel.h"

namespace dvm::fuser {

using detail::Signature;
using detail::make_signature;

struct CachedGroup {
  std::vector<int32_t> members;  // indices into the flushed node list
  vm::Form form = vm::Form::Elementwise;
  int red_begin = 0, red_end = 0;
  int32_t full_from = 0;         // member whose shape is the group's full shape...
  bool full_from_input = false;  // ...or whose input's shape is (a reduction)
  std::shared_ptr<vm::Kernel> kernel;
  ReplayPlan replay;  // its space and arguments, for new sizes
  std::vector<ScalarOrigin> scalars;  // its scalar parameters, by origin
};

struct CachedPlan {
  std::vector<CachedGroup> groups;     // in execution order
  std::vector<Placement> placement;    // per node, as partition left it
};

class PlanCache {
 public:
  static PlanCache& current();  // per thread, like the trace
  const CachedPlan* find(const Signature& sig) const;
  const CachedPlan& insert(Signature sig, CachedPlan plan);
  int64_t hits = 0, misses = 0;
  size_t size() const { return entries_.size(); }
  void clear() { entries_.clear(); }

 private:
  struct Entry {
    Signature sig;
    CachedPlan plan;
  };
  std::unordered_multimap<uint64_t, Entry> entries_;
};

}  // namespace dvm::fuser
