// The settings table's parsing and validation.
#include "runtime/settings.h"

#include <charconv>
#include <vector>

#include "dvm/error.h"

namespace dvm::runtime {
namespace {

// Enum's and Bool's spellings, in value order.
std::vector<std::string_view> spellings(Setting s) {
  std::vector<std::string_view> out;
  std::string_view v = info(s).values;
  for (size_t at = 0;;) {
    const size_t bar = v.find('|', at);
    out.push_back(v.substr(at, bar == std::string_view::npos ? std::string_view::npos : bar - at));
    if (bar == std::string_view::npos) return out;
    at = bar + 1;
  }
}

bool unbounded(const SettingInfo& i) { return i.hi == kNoMax || i.hi == kIntMax; }

}  // namespace

bool parse_value(Setting s, std::string_view text, int64_t* out) {
  const SettingInfo& i = info(s);
  if (i.type == SettingType::Int) {
    int64_t v = 0;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, v);
    if (text.empty() || ec != std::errc() || ptr != end || v < i.lo || v > i.hi) return false;
    *out = v;
    return true;
  }
  const std::vector<std::string_view> names = spellings(s);
  for (size_t k = 0; k < names.size(); ++k)
    if (names[k] == text) {
      *out = static_cast<int64_t>(k);
      return true;
    }
  return false;
}

int64_t default_value(Setting s) {
  int64_t v = 0;
  if (!parse_value(s, info(s).default_text, &v))
    throw Error("internal: setting " + std::string(info(s).name) + " has an invalid default");
  return v;
}

std::string accepted_text(Setting s) {
  const SettingInfo& i = info(s);
  if (i.type == SettingType::Int)
    return unbounded(i) ? "N >= " + std::to_string(i.lo)
                        : "N from " + std::to_string(i.lo) + " to " + std::to_string(i.hi);
  const std::vector<std::string_view> names = spellings(s);
  std::string out;
  for (size_t k = 0; k < names.size(); ++k) {
    if (k > 0) out += k + 1 == names.size() ? " or " : ", ";
    out += names[k];
  }
  return out;
}

std::string accepted_spec(Setting s) {
  const SettingInfo& i = info(s);
  if (i.type != SettingType::Int) return std::string(i.values);
  return unbounded(i) ? "N >= " + std::to_string(i.lo) : std::to_string(i.lo) + ".." + std::to_string(i.hi);
}

int64_t check_api_value(Setting s, int64_t v) {
  const SettingInfo& i = info(s);
  const int64_t hi = i.type == SettingType::Int ? i.hi : static_cast<int64_t>(spellings(s).size()) - 1;
  const int64_t lo = i.type == SettingType::Int ? i.lo : 0;
  if (v < lo || v > hi)
    throw Error(std::string(i.api) + ": expected " + accepted_text(s) + ", got " + std::to_string(v));
  return v;
}

int64_t check_api_text(Setting s, std::string_view text) {
  int64_t v = 0;
  if (!parse_value(s, text, &v))
    throw Error(std::string(info(s).api) + ": expected " + accepted_text(s) + ", got '" + std::string(text) + "'");
  return v;
}

}  // namespace dvm::runtime
