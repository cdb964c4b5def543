// The public 16-bit float conversions (dvm/dtype.h): the vector unit's own
// rules (backends/convert.h), so values a user converts match the stored ones.
#include "backends/convert.h"
#include "dvm/dtype.h"

namespace dvm {

float to_float(Half h) { return backends::f16_to_f32(h.bits); }
float to_float(BFloat16 h) { return backends::bf16_to_f32(h.bits); }
Half to_half(float f) { return Half{backends::f32_to_f16(f)}; }
BFloat16 to_bfloat16(float f) { return BFloat16{backends::f32_to_bf16(f)}; }

}  // namespace dvm
