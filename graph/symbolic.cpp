// Probes and the factoring of captured extents (graph/symbolic.h).
#include "graph/symbolic.h"

#include <cstdlib>

namespace dvm::graph {
namespace {

bool is_prime(int64_t n) {
  if (n < 2) return false;
  for (int64_t d = 2; d * d <= n; ++d)
    if (n % d == 0) return false;
  return true;
}

struct Probes {
  std::array<int64_t, kMaxSymbols> p{};
  Probes() {
    int64_t n = 16411;  // prime; far from powers of two and round numbers
    for (int i = 0; i < kMaxSymbols; ++i) {
      while (!is_prime(n)) ++n;
      p[static_cast<size_t>(i)] = n;
      n += 2;
    }
  }
};

const Probes& probes() {
  static const Probes p;
  return p;
}

// Whether r (> 0) lies within 64 of a nonzero multiple of m.
bool near_multiple(int64_t r, int64_t m) {
  if (r < m - 64) return false;
  const int64_t rem = r % m;
  return rem <= 64 || m - rem <= 64;
}

}  // namespace

int64_t probe(int symbol) { return probes().p[static_cast<size_t>(symbol)]; }

bool Monomial::constant() const {
  for (uint8_t e : exp)
    if (e) return false;
  return true;
}

bool Monomial::eval(const int64_t* values, int64_t* out) const {
  int64_t v = coeff;
  for (int i = 0; i < kMaxSymbols; ++i)
    for (int k = 0; k < exp[static_cast<size_t>(i)]; ++k)
      if (__builtin_mul_overflow(v, values[i], &v)) return false;
  *out = v;
  return true;
}

std::string Monomial::to_string(const std::vector<std::string>& names) const {
  std::vector<std::string> parts;
  for (int i = 0; i < kMaxSymbols; ++i)
    for (int k = 0; k < exp[static_cast<size_t>(i)]; ++k)
      parts.push_back(static_cast<size_t>(i) < names.size() ? names[static_cast<size_t>(i)] : std::string("?"));
  const int64_t c = std::llabs(coeff);
  if (c != 1 || parts.empty()) parts.push_back(std::to_string(c));
  std::string s(coeff < 0 ? "-" : "");
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) s.push_back('*');
    s.append(parts[i]);
  }
  return s;
}

bool factor(int64_t v, int symbols, Monomial* out) {
  Monomial m;
  int64_t r = v < 0 ? -v : v;
  if (v == INT64_MIN) return false;
  for (int i = 0; i < symbols && r != 0; ++i) {
    const int64_t p = probe(i);
    while (r % p == 0 && m.exp[static_cast<size_t>(i)] < 255) {
      r /= p;
      ++m.exp[static_cast<size_t>(i)];
    }
  }
  if (r != 0)
    for (int i = 0; i < symbols; ++i) {
      if (near_multiple(r, probe(i))) return false;
      for (int j = i; j < symbols; ++j)
        if (near_multiple(r, probe(i) * probe(j))) return false;
    }
  m.coeff = v < 0 ? -r : r;
  *out = m;
  return true;
}

}  // namespace dvm::graph
