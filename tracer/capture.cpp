// The thread's capture hooks (tracer/capture.h).
#include "tracer/capture.h"

namespace dvm::detail {
namespace {
thread_local CaptureHooks* t_capture = nullptr;
}  // namespace

CaptureHooks* capture() { return t_capture; }
void set_capture(CaptureHooks* hooks) { t_capture = hooks; }

}  // namespace dvm::detail
