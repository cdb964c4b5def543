// The settings table: README.md's settings table matches it row for row; a
// bad environment value is one warning naming the variable, the value and
// what is accepted, and the default stays; the API setters reject what the
// table does not accept with dvm::Error.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "dvm/dvm.h"
#include "runtime/environment.h"
#include "runtime/settings.h"

namespace dvm::runtime {
namespace {

// ---- README.md's settings table ---------------------------------------------

struct ReadmeRow {
  std::string env, api, default_text, accepted, scope;
};

// A cell's text: the code span's contents when it is one, with "\|" as "|".
std::string cell_text(std::string cell) {
  const size_t b = cell.find_first_not_of(' ');
  const size_t e = cell.find_last_not_of(' ');
  cell = b == std::string::npos ? "" : cell.substr(b, e - b + 1);
  if (cell.size() >= 2 && cell.front() == '`') {
    const size_t close = cell.find('`', 1);
    cell = cell.substr(1, close == std::string::npos ? std::string::npos : close - 1);
  }
  std::string out;
  for (size_t i = 0; i < cell.size(); ++i) {
    if (cell[i] == '\\' && i + 1 < cell.size() && cell[i + 1] == '|') continue;
    out += cell[i];
  }
  return out;
}

// Splits a table line on the bars that are not escaped ("\|").
std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  for (size_t i = 1; i < line.size(); ++i) {  // past the leading bar
    if (line[i] == '|' && line[i - 1] != '\\') {
      out.push_back(cell_text(cur));
      cur.clear();
    } else {
      cur += line[i];
    }
  }
  return out;
}

// The rows of the table under "## Settings", by environment variable.
std::map<std::string, ReadmeRow> readme_settings() {
  std::ifstream in(std::string(DVM_SOURCE_DIR) + "/README.md");
  EXPECT_TRUE(in.good()) << "cannot read README.md";
  std::map<std::string, ReadmeRow> rows;
  std::string line;
  bool in_section = false, in_table = false;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) {
      in_section = line == "## Settings";
      continue;
    }
    if (!in_section) continue;
    if (line.rfind("| environment |", 0) == 0) {
      in_table = true;
      continue;
    }
    if (!in_table || line.rfind("| ---", 0) == 0) continue;
    if (line.rfind("|", 0) != 0) break;  // the table ended
    const std::vector<std::string> c = cells(line);
    EXPECT_EQ(c.size(), 6u) << "README settings row with other than 6 cells: " << line;
    if (c.size() < 5) continue;
    EXPECT_EQ(rows.count(c[0]), 0u) << c[0] << " has two rows in README.md";
    rows[c[0]] = {c[0], c[1], c[2], c[3], c[4]};
  }
  return rows;
}

TEST(Settings, ReadmeTableMatchesTheSettingsTable) {
  const std::map<std::string, ReadmeRow> readme = readme_settings();
  ASSERT_FALSE(readme.empty()) << "no settings table under '## Settings' in README.md";
  for (int k = 0; k < kSettingCount; ++k) {
    const Setting s = static_cast<Setting>(k);
    const SettingInfo& i = info(s);
    auto it = readme.find(std::string(i.env));
    if (it == readme.end()) {
      ADD_FAILURE() << i.env << " is in runtime/settings.h but not in README.md's settings table";
      continue;
    }
    const ReadmeRow& r = it->second;
    EXPECT_EQ(r.api, i.api) << i.env << ": API";
    EXPECT_EQ(r.default_text, i.default_text) << i.env << ": default";
    EXPECT_EQ(r.accepted, accepted_spec(s)) << i.env << ": accepted";
    EXPECT_EQ(r.scope, i.scope == Scope::Thread ? "thread" : "process") << i.env << ": scope";
  }
  for (const auto& [env, row] : readme) {
    bool known = false;
    for (const SettingInfo& i : kSettings) known |= i.env == env;
    EXPECT_TRUE(known) << env << " is in README.md's settings table but not in runtime/settings.h";
  }
}

TEST(Settings, DefaultsAreAccepted) {
  for (int k = 0; k < kSettingCount; ++k) {
    const Setting s = static_cast<Setting>(k);
    int64_t v = 0;
    EXPECT_TRUE(parse_value(s, info(s).default_text, &v)) << info(s).env;
    EXPECT_EQ(v, default_value(s)) << info(s).env;
  }
}

// ---- the environment --------------------------------------------------------

// Sets an environment variable for the scope, then restores what was there.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::string& value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    setenv(name_.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_.c_str(), old_->c_str(), 1);
    else unsetenv(name_.c_str());
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// Every setting's variable at its default for the scope, whatever this
// process was started with.
std::vector<std::unique_ptr<ScopedEnv>> default_environment() {
  std::vector<std::unique_ptr<ScopedEnv>> out;
  for (const SettingInfo& i : kSettings)
    out.push_back(std::make_unique<ScopedEnv>(std::string(i.env), std::string(i.default_text)));
  return out;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Values no setting accepts, and per setting one just outside its range.
std::vector<std::string> bad_values(Setting s) {
  std::vector<std::string> out = {"", "bogus", "4x", " 4", "99999999999999999999999"};
  const SettingInfo& i = info(s);
  if (i.type == SettingType::Int) {
    out.push_back(std::to_string(i.lo - 1));
    if (i.hi != kNoMax) out.push_back(std::to_string(i.hi + 1));
  } else {
    out.push_back("2");
    out.push_back("AUTO");
  }
  return out;
}

TEST(Environment, BadValueIsOneWarningAndTheDefaultStays) {
  const auto clean = default_environment();
  for (int k = 0; k < kSettingCount; ++k) {
    const Setting s = static_cast<Setting>(k);
    const SettingInfo& i = info(s);
    for (const std::string& bad : bad_values(s)) {
      ScopedEnv env(std::string(i.env), bad);
      const EnvironmentValues got = read_environment();
      const std::string what = std::string(i.env) + "='" + bad + "'";
      EXPECT_EQ(got.value[k], default_value(s)) << what;
      EXPECT_EQ(count(got.warnings, "\n"), 1u) << what << ": " << got.warnings;
      EXPECT_EQ(count(got.warnings, what), 1u) << what << ": " << got.warnings;
      EXPECT_NE(got.warnings.find("expected " + accepted_text(s)), std::string::npos) << got.warnings;
      EXPECT_NE(got.warnings.find(std::string(i.default_text)), std::string::npos) << got.warnings;
    }
  }
}

TEST(Environment, GoodValuesAreRead) {
  struct Case {
    Setting s;
    const char* text;
    int64_t value;
  };
  const Case cases[] = {
      {Setting::Isa, "avx2", 1},         {Setting::TraceLimit, "17", 17},  {Setting::Tier, "off", 0},
      {Setting::Tier, "eager", 2},       {Setting::JitThreshold, "1", 1},  {Setting::NumThreads, "0", 0},
      {Setting::NumThreads, "3", 3},     {Setting::KernelCache, "8", 8},   {Setting::PlanCheck, "0", 0},
      {Setting::PlanCheck, "1", 1},      {Setting::JitLog, "1", 1},
  };
  const auto clean = default_environment();
  for (const Case& c : cases) {
    ScopedEnv env(std::string(info(c.s).env), c.text);
    const EnvironmentValues got = read_environment();
    EXPECT_EQ(got.value[static_cast<int>(c.s)], c.value) << info(c.s).env << "=" << c.text;
    EXPECT_EQ(got.warnings, "") << info(c.s).env << "=" << c.text;
  }
}

// A fresh process with bad values warns once per variable however many
// entry points it calls, and runs with the defaults.
TEST(EnvironmentDeathTest, AFreshProcessWarnsOnceAndKeepsTheDefaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto clean = default_environment();
  ScopedEnv tier("DVM_TIER", "fast");
  ScopedEnv threshold("DVM_JIT_THRESHOLD", "0");
  EXPECT_EXIT(
      {
        apply_environment();
        set_trace_limit(trace_limit());
        flush();
        (void)stats();
        const bool defaults = tier_mode() == TierMode::Auto && jit_threshold() == 4;
        std::exit(defaults ? 0 : 1);
      },
      ::testing::ExitedWithCode(0),
      "^dvm: ignoring DVM_TIER='fast': expected off, auto or eager; keeping the default auto\n"
      "dvm: ignoring DVM_JIT_THRESHOLD='0': expected N >= 1; keeping the default 4\n$");
}

// ---- the API setters --------------------------------------------------------

template <class F>
void expect_rejected(const char* what, F&& f, Setting s) {
  try {
    f();
    ADD_FAILURE() << what << ": no dvm::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(std::string(info(s).api)), std::string::npos) << what << ": " << msg;
    EXPECT_NE(msg.find(accepted_text(s)), std::string::npos) << what << ": " << msg;
  }
}

TEST(Settings, ApiSettersRejectWhatTheTableDoesNot) {
  const int64_t limit = trace_limit();
  const TierMode mode = tier_mode();
  const int64_t threshold = jit_threshold();
  const int threads = num_threads();
  const std::string active = isa();
  for (int k = 0; k < kSettingCount; ++k) {
    const Setting s = static_cast<Setting>(k);
    switch (s) {
      case Setting::Isa:
        expect_rejected("set_isa(\"avx1024\")", [] { set_isa("avx1024"); }, s);
        expect_rejected("set_isa(\"\")", [] { set_isa(""); }, s);
        break;
      case Setting::TraceLimit:
        expect_rejected("set_trace_limit(0)", [] { set_trace_limit(0); }, s);
        break;
      case Setting::Tier:
        expect_rejected("set_tier_mode(3)", [] { set_tier_mode(static_cast<TierMode>(3)); }, s);
        expect_rejected("set_tier_mode(-1)", [] { set_tier_mode(static_cast<TierMode>(-1)); }, s);
        break;
      case Setting::JitThreshold:
        expect_rejected("set_jit_threshold(0)", [] { set_jit_threshold(0); }, s);
        break;
      case Setting::NumThreads:
        expect_rejected("set_num_threads(-1)", [] { set_num_threads(-1); }, s);
        break;
      case Setting::KernelCache:
        expect_rejected("set_kernel_cache_capacity(0)", [] { set_kernel_cache_capacity(0); }, s);
        break;
      case Setting::PerfMap:  // a bool: no value to reject
        EXPECT_EQ(info(s).api, "dvm::set_perf_map()");
        break;
      case Setting::WeightCopies:  // a bool: no value to reject
        EXPECT_EQ(info(s).api, "dvm::set_weight_copies()");
        break;
      case Setting::PlanCheck:
      case Setting::JitLog:
        EXPECT_EQ(info(s).api, "") << info(s).env << " has an API call this test does not exercise";
        break;
    }
  }
  EXPECT_EQ(trace_limit(), limit);
  EXPECT_EQ(tier_mode(), mode);
  EXPECT_EQ(jit_threshold(), threshold);
  EXPECT_EQ(num_threads(), threads);
  EXPECT_EQ(isa(), active);
}

TEST(Settings, ApiSettersTakeTheEdgesOfTheirRange) {
  const int64_t limit = trace_limit();
  const int64_t threshold = jit_threshold();
  set_trace_limit(1);
  EXPECT_EQ(trace_limit(), 1);
  set_trace_limit(limit);
  set_jit_threshold(1);
  EXPECT_EQ(jit_threshold(), 1);
  set_jit_threshold(threshold);
  set_num_threads(0);
}

}  // namespace
}  // namespace dvm::runtime
