// The backend table: registration and lookups by ISA and kind.
#include "vm/backend.h"

#include "backends/registry.h"
#include "dvm/error.h"

namespace dvm::vm {
namespace {

constexpr int kIsas = 3;

struct Registry {
  std::vector<const Backend*> all;
  BackendRef interp[kIsas];
  BackendRef machine[kIsas];

  int add(const Backend* b) {
    if (all.size() >= static_cast<size_t>(kMaxBackends))
      throw Error(std::string("register_backend: at most ") + std::to_string(kMaxBackends) +
                  " backends, cannot add " + b->name);
    const int isa = static_cast<int>(b->isa);
    const int slot = static_cast<int>(all.size());
    BackendRef* by_isa = b->kind == BackendKind::Interpreter ? interp : machine;
    if (!by_isa[isa]) by_isa[isa] = BackendRef{b, slot};  // the first registered serves its ISA
    all.push_back(b);
    return slot;
  }
};

// Never destroyed, as the kernel cache: stats() reads it from a host's
// global destructor too.
Registry& registry() {
  static Registry* r = [] {
    auto* made = new Registry;
    for (const Backend* b : backends::builtin_backends()) made->add(b);
    return made;
  }();
  return *r;
}

}  // namespace

int register_backend(const Backend* b) { return registry().add(b); }

const std::vector<const Backend*>& registered_backends() { return registry().all; }

int backend_slot(const Backend* b) {
  const auto& all = registry().all;
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i] == b) return static_cast<int>(i);
  return -1;
}

BackendRef interpreter_for(backends::Isa isa) { return registry().interp[static_cast<int>(isa)]; }
BackendRef machine_code_for(backends::Isa isa) { return registry().machine[static_cast<int>(isa)]; }

size_t code_bytes_in_use() {
  size_t n = 0;
  for (const Backend* b : registry().all)
    if (b->code_bytes) n += b->code_bytes();
  return n;
}

}  // namespace dvm::vm
