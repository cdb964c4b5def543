// The check every test of bad input shares: f throws a dvm::Error whose
// message contains every one of `parts` (and nothing else escapes it).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dvm/error.h"

namespace dvm::testing {

template <class F>
inline void expect_error_message(const std::string& what, F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << what << ": no dvm::Error thrown";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts)
      EXPECT_TRUE(msg.find(p) != std::string::npos) << what << ": message \"" << msg << "\" lacks \"" << p << "\"";
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": threw a non-dvm exception: " << e.what();
  } catch (...) {
    ADD_FAILURE() << what << ": threw something that is not an exception";
  }
}

}  // namespace dvm::testing
