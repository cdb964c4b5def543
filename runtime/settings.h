// The settings table: every runtime setting with its environment variable,
// API call, type, accepted values, default and scope, and the one validation
// that both the environment and the API setters go through.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace dvm::runtime {

enum class SettingType : uint8_t {
  Int,   // a decimal integer in [lo, hi]
  Enum,  // one of `values` ("a|b|c"); its value is its index
  Bool,  // 0 or 1
};

// Process: one value for the whole process. Thread: the environment gives
// every thread's starting value; the API call changes the calling thread's.
enum class Scope : uint8_t { Process, Thread };

inline constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();
inline constexpr int64_t kIntMax = std::numeric_limits<int>::max();

// X(id, name, env, api, type, lo, hi, values, default, scope)
//   api: the public call that sets it, "" where only the environment does.
//   lo, hi: Int's accepted range (kNoMax: no upper bound but the type's).
//   values: Enum's accepted spellings in value order; Bool's are "0|1".
//   default: spelled as the environment would spell it.
#define DVM_SETTINGS(X)                                                                                    \
  X(Isa, "isa", "DVM_ISA", "dvm::set_isa()", Enum, 0, 2, "portable|avx2|avx512", "avx512", Process)        \
  X(TraceLimit, "trace_limit", "DVM_TRACE_LIMIT", "dvm::set_trace_limit()", Int, 1, kNoMax, "", "4096",    \
    Thread)                                                                                                \
  X(Tier, "tier", "DVM_TIER", "dvm::set_tier_mode()", Enum, 0, 2, "off|auto|eager", "auto", Process)       \
  X(JitThreshold, "jit_threshold", "DVM_JIT_THRESHOLD", "dvm::set_jit_threshold()", Int, 1, kNoMax, "",   \
    "4", Process)                                                                                          \
  X(NumThreads, "num_threads", "DVM_NUM_THREADS", "dvm::set_num_threads()", Int, 0, 1024, "", "0",        \
    Process)                                                                                               \
  X(KernelCache, "kernel_cache", "DVM_KERNEL_CACHE", "dvm::set_kernel_cache_capacity()", Int, 1, kNoMax, "", \
    "4096", Process)                                                                                       \
  X(PlanCheck, "plan_check", "DVM_PLAN_CHECK", "", Bool, 0, 1, "0|1", "0", Process)                       \
  X(JitLog, "jit_log", "DVM_JIT_LOG", "", Bool, 0, 1, "0|1", "0", Process)                               \
  X(PerfMap, "perf_map", "DVM_PERF_MAP", "dvm::set_perf_map()", Bool, 0, 1, "0|1", "0", Process)         \
  X(WeightCopies, "weight_copies", "DVM_WEIGHT_COPIES", "dvm::set_weight_copies()", Bool, 0, 1, "0|1", "1", \
    Process)

enum class Setting : uint8_t {
#define DVM_SETTING_ID(id, ...) id,
  DVM_SETTINGS(DVM_SETTING_ID)
#undef DVM_SETTING_ID
};

struct SettingInfo {
  std::string_view name;
  std::string_view env;
  std::string_view api;
  SettingType type;
  int64_t lo, hi;
  std::string_view values;
  std::string_view default_text;
  Scope scope;
};

inline constexpr SettingInfo kSettings[] = {
#define DVM_SETTING_ROW(id, name, env, api, type, lo, hi, values, def, scope) \
  {name, env, api, SettingType::type, lo, hi, values, def, Scope::scope},
    DVM_SETTINGS(DVM_SETTING_ROW)
#undef DVM_SETTING_ROW
};
inline constexpr int kSettingCount = static_cast<int>(std::size(kSettings));

constexpr const SettingInfo& info(Setting s) { return kSettings[static_cast<int>(s)]; }

// Parses text as a value of s (Int: the whole text is a decimal integer in
// range; Enum: one of the spellings; Bool: 0 or 1). False if it is not one.
bool parse_value(Setting s, std::string_view text, int64_t* out);
// s's default value (its default_text, parsed).
int64_t default_value(Setting s);
// The accepted values in words: "N >= 1", "off, auto or eager", "0 or 1".
std::string accepted_text(Setting s);
// The accepted values as README.md's settings table spells them:
// "N >= 1", "off|auto|eager", "0|1".
std::string accepted_spec(Setting s);

// API setters' validation: returns v if s accepts it, else throws dvm::Error
// naming the call, the accepted values and what it got.
int64_t check_api_value(Setting s, int64_t v);
// The same for a setter that takes a spelling (an Enum's name).
int64_t check_api_text(Setting s, std::string_view text);

}  // namespace dvm::runtime
