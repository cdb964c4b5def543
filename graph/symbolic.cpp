// Probes and the factoring of captured extents (graph/symbolic.h).
#include "graph/symbolic.h"

#include <bit>
#include <cstdlib>
#include <cstring>

namespace dvm::graph {
namespace {

// Primes chosen (once, by a search) so that no power of two (nor 3 or 5
// times one), no multiple of 1000 up to 10^8 and no common vocabulary size
// (32000, 50257, 128256, 151936, ...) lies within 16 of k * p (k <= 16) or
// of k * p * q (k <= 4): such constant extents are never taken for a sum
// or difference of symbols, while a sum or difference within 16 of such a
// product is.
constexpr std::array<int64_t, kMaxSymbols> kProbes = {40031, 40087, 40129, 40163, 40213, 40277, 40343, 40387,
                                                      40423, 40459, 40519, 40559, 40609, 40697, 40739, 40787};

// Whether r (> 0) lies within 16 of k * m for some 1 <= k <= max_k.
bool near_multiple(int64_t r, int64_t m, int64_t max_k) {
  if (r < m - 16 || r > max_k * m + 16) return false;
  const int64_t rem = r % m;
  return rem <= 16 || m - rem <= 16;
}

}  // namespace

int64_t probe(int symbol) { return kProbes[static_cast<size_t>(symbol)]; }

bool Monomial::constant() const {
  for (uint8_t e : exp)
    if (e) return false;
  return true;
}

bool Monomial::eval(const int64_t* values, int64_t* out) const {
  int64_t v = coeff;
  // Eight exponents per word, visiting only the symbols that occur.
  static_assert(kMaxSymbols % 8 == 0);
  for (int w = 0; w < kMaxSymbols / 8; ++w) {
    uint64_t word = 0;
    std::memcpy(&word, exp.data() + 8 * w, 8);
    while (word) {
      const int bit = std::countr_zero(word) & ~7;
      const int e = static_cast<int>((word >> bit) & 0xff);
      word &= ~(uint64_t{0xff} << bit);
      const int64_t x = values[8 * w + bit / 8];
      for (int k = 0; k < e; ++k)
        if (__builtin_mul_overflow(v, x, &v)) return false;
    }
  }
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

bool Sum::eval(const int64_t* values, int64_t* out) const {
  int64_t total = 0;
  for (const Monomial& m : terms) {
    int64_t v = 0;
    if (!m.eval(values, &v) || __builtin_add_overflow(total, v, &total)) return false;
  }
  *out = total;
  return true;
}

std::string Sum::to_string(const std::vector<std::string>& names) const {
  if (terms.empty()) return "0";
  std::string s;
  for (size_t i = 0; i < terms.size(); ++i) {
    std::string t = terms[i].to_string(names);
    if (i && t[0] == '-') s += " - " + t.substr(1);
    else s += (i ? " + " : "") + t;
  }
  return s;
}

bool multiply(const Monomial& a, const Monomial& b, Monomial* out) {
  Monomial m;
  if (__builtin_mul_overflow(a.coeff, b.coeff, &m.coeff)) return false;
  for (size_t i = 0; i < m.exp.size(); ++i) {
    const int e = a.exp[i] + b.exp[i];
    if (e > 255) return false;
    m.exp[i] = static_cast<uint8_t>(e);
  }
  *out = m;
  return true;
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
      if (near_multiple(r, probe(i), 16)) return false;
      for (int j = i; j < symbols; ++j)
        if (near_multiple(r, probe(i) * probe(j), 4)) return false;
    }
  m.coeff = v < 0 ? -r : r;
  *out = m;
  return true;
}

std::string probe_collision(int64_t v, const std::vector<std::string>& names) {
  const int64_t r = v < 0 ? -v : v;
  for (size_t i = 0; i < names.size() && i < kMaxSymbols; ++i) {
    const int64_t p = probe(static_cast<int>(i));
    if (!near_multiple(r, p, 16)) continue;
    const int64_t k = (r + p / 2) / p;
    return " (if " + std::to_string(v) + " is a constant of yours: it lies within 16 of " +
           (k > 1 ? std::to_string(k) + " * " : "") + std::to_string(p) + ", the number " + names[i] +
           " stands for during the capture, so it cannot be told from a sum with " + names[i] +
           "; a graph takes no constant extent within 16 of up to 16 times a symbol's number)";
  }
  return "";
}

bool derived_length(int64_t v, int64_t axis) {
  if (v <= 0 || v >= axis) return false;
  if (axis - v <= 2048) return true;
  if (axis > INT64_MAX / 16) return false;  // (no overflow below)
  for (int64_t d = 2; d <= 16; ++d) {
    // Within 1 of k * axis / d: |d * v - k * axis| < d for the nearest k.
    const int64_t k = (d * v + axis / 2) / axis;
    const int64_t diff = d * v - k * axis;
    if (k >= 1 && k < d && std::llabs(diff) < d) return true;
  }
  return false;
}

}  // namespace dvm::graph
