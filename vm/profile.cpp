// Profiling hooks (vm/profile.h): the calling thread's name in a trace.
#include "vm/profile.h"

namespace dvm::vm::profile {
namespace {
thread_local const char* t_name = nullptr;
}  // namespace

void set_thread_name(const char* name) { t_name = name; }
const char* thread_name() { return t_name; }

}  // namespace dvm::vm::profile
