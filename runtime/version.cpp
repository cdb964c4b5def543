// The library's version string, compiled in so that dvm::version() reports
// the libdvm.a that was linked, whatever headers the caller was built with.
#include "dvm/version.h"

namespace dvm {

const char* version() noexcept { return DVM_VERSION_STRING; }

}  // namespace dvm
