// Kernel and KernelCache.
#include "vm/kernel_cache.h"

#include "dvm/error.h"
#include "vm/forms.h"

namespace dvm::vm {

Kernel::Kernel(Bytecode bc, VerifiedProgram vp)
    : bytecode_(std::move(bc)), hash_(bytecode_.hash()), vp_(std::move(vp)) {
  const Program& p = vp_.program;
  for (size_t i = 0; i < p.code.size(); ++i) {
    const Instr& ins = p.code[i];
    const OpClass cls = op_class(ins.op);
    if (ins.op == Op::MMAR) continue;  // its operands are registers
    if (cls == OpClass::Contract) {  // reads both its arguments
      arg_uses_.push_back({ins.r[1], ins.op, false});
      arg_uses_.push_back({ins.r[2], ins.op, false});
      continue;
    }
    if (cls != OpClass::Load && cls != OpClass::Store) continue;
    const bool prologue =
        form_row(p.form).reduces == ReduceAxis::Outer && static_cast<int>(i) < vp_.first_reduce;
    arg_uses_.push_back({cls == OpClass::Load ? ins.r[1] : ins.r[0], ins.op, prologue});
  }
}

namespace {
// The cache's use clock. A kernel touched when it is not already the most
// recent one advances it, so "used after" always means a larger stamp; a
// kernel launched again and again costs one relaxed load per launch.
std::atomic<uint64_t> g_use_clock{1};
}  // namespace

void Kernel::touch() const {
  if (last_use_.load(std::memory_order_relaxed) < g_use_clock.load(std::memory_order_relaxed))
    last_use_.store(g_use_clock.fetch_add(1, std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

std::atomic<int64_t>& new_shape_count() {
  static std::atomic<int64_t> n{0};
  return n;
}

bool Kernel::note_shape(const int64_t (&extent)[kMaxParts]) const {
  touch();
  // A 64-bit key stands for the extents, and the check takes no lock: it
  // runs on every launch. Two shapes sharing a key (a 2^-63 chance per
  // pair) or two threads meeting a shape at once misstate a statistic only.
  uint64_t key = 0x9E3779B97F4A7C15ull;
  for (int64_t e : extent) {
    key = (key ^ static_cast<uint64_t>(e)) * 0xFF51AFD7ED558CCDull;
    key ^= key >> 29;
  }
  key |= 1;
  const uint32_t next = shape_next_.load(std::memory_order_relaxed);
  if (shape_keys_[(next - 1) % kRememberedShapes].load(std::memory_order_relaxed) == key) return false;
  for (const std::atomic<uint64_t>& k : shape_keys_)
    if (k.load(std::memory_order_relaxed) == key) return false;
  shape_keys_[shape_next_.fetch_add(1, std::memory_order_relaxed) % kRememberedShapes].store(
      key, std::memory_order_relaxed);
  new_shape_count().fetch_add(1, std::memory_order_relaxed);
  return true;
}

KernelCache::KernelCache() : capacity_(4096) {}

// Never destroyed: a host's global destructor may still read the
// statistics (kernel_stats) or run a kernel after dvm's statics are gone.
KernelCache& KernelCache::global() {
  static KernelCache* cache = new KernelCache;
  return *cache;
}

void KernelCache::evict_to_capacity() {
  // The least recently used first (launches touch their kernel; fetches
  // advance the clock). Evictions are rare: a scan, not an ordered index.
  while (static_cast<int64_t>(map_.size()) > capacity_) {
    auto victim = order_.begin();
    for (auto it = order_.begin(); it != order_.end(); ++it)
      if (map_.at(*it)->last_use() < map_.at(*victim)->last_use()) victim = it;
    map_.erase(*victim);
    order_.erase(victim);
    evictions_.fetch_add(1, std::memory_order_relaxed);
  }
}

std::shared_ptr<Kernel> KernelCache::get(const Bytecode& bc, bool* fresh) {
  if (fresh) *fresh = false;
  std::string key(bc.view());
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it != map_.end()) {
      hits_.fetch_add(1, std::memory_order_relaxed);
      it->second->touch();
      return it->second;
    }
  }
  VerifiedProgram vp;
  std::string error;
  if (!verify(bc, &vp, &error)) throw Error(error);
  auto k = std::make_shared<Kernel>(bc, std::move(vp));
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = map_.emplace(key, k);
  it->second->touch();
  if (!inserted) {
    hits_.fetch_add(1, std::memory_order_relaxed);
    return it->second;
  }
  misses_.fetch_add(1, std::memory_order_relaxed);
  if (fresh) *fresh = true;
  order_.push_back(std::move(key));
  std::shared_ptr<Kernel> result = it->second;
  evict_to_capacity();
  return result;
}

int64_t KernelCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(map_.size());
}

void KernelCache::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  map_.clear();
  order_.clear();
}

std::vector<std::shared_ptr<Kernel>> KernelCache::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<Kernel>> out;
  for (const auto& key : order_) out.push_back(map_.at(key));
  return out;
}

void KernelCache::set_capacity(int64_t kernels) {
  std::lock_guard<std::mutex> lock(mu_);
  capacity_ = kernels < 1 ? 1 : kernels;
  evict_to_capacity();
}

int64_t KernelCache::capacity() const {
  std::lock_guard<std::mutex> lock(mu_);
  return capacity_;
}

}  // namespace dvm::vm
