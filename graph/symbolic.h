// Symbolic extents of a captured graph. Symbol i is captured as a prime of
// its own (its probe), so an extent the capture computed from symbols and
// constants by products (reshape, flatten, strides, one axis's offset) is read back by
// factoring out the probes: coeff * prod(symbol_i ^ e_i).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace dvm::graph {

inline constexpr int kMaxSymbols = 16;

// The probe of symbol i (0 <= i < kMaxSymbols): distinct primes near 40000.
int64_t probe(int symbol);

struct Monomial {
  int64_t coeff = 0;  // negative for a reversed stride
  std::array<uint8_t, kMaxSymbols> exp{};
  bool constant() const;
  // Its value when symbol i is values[i]; false when it overflows int64.
  bool eval(const int64_t* values, int64_t* out) const;
  // "B*S*12", "768", "-S".
  std::string to_string(const std::vector<std::string>& names) const;
  friend bool operator==(const Monomial&, const Monomial&) = default;
};

// a * b into *out; false when the coefficient overflows.
bool multiply(const Monomial& a, const Monomial& b, Monomial* out);
inline Monomial constant(int64_t c) {
  Monomial m;
  m.coeff = c;
  return m;
}

// A sum of monomials of different symbols (none with a zero coefficient;
// none at all is 0): a view's offset past several sliced axes, 48 * A + 3.
struct Sum {
  std::vector<Monomial> terms;
  // Its value when symbol i is values[i]; false when it overflows int64.
  bool eval(const int64_t* values, int64_t* out) const;
  // "A*48 + 3", "0".
  std::string to_string(const std::vector<std::string>& names) const;
  friend bool operator==(const Sum&, const Sum&) = default;
};
inline Sum sum_of(const Monomial& m) { return m.coeff == 0 ? Sum{} : Sum{{m}}; }

// `v` read as a monomial of the first `symbols` symbols. False where v
// cannot be one: what is left once the probes are divided out lies within
// 16 of k times a probe (k <= 16) or of a product of two (k <= 4): v was a
// sum or a difference, such as S - 1 or 2 * S + 3.
bool factor(int64_t v, int symbols, Monomial* out);

// Why factor() refused v when v is a constant that merely lies near a
// symbol's probe (a size of the user's, say 40030): a sentence naming the
// symbol (names[i]) and its number, else empty.
std::string probe_collision(int64_t v, const std::vector<std::string>& names);

// Whether v, a constant length (no product of symbols) taken along an axis
// whose extent `axis` involves symbols, is likely made from that extent by
// a difference or a division, which a graph cannot follow: S - 20, or
// ceil(S / 2) of chunk(2) or a step of 2. That is, v lies within 2048 below
// the axis's number, or within 1 of k / d of it (2 <= d <= 16, k < d). A
// constant that the axis's number is a multiple of (a window of c rows of
// an axis of S * c) never is, nor is a power of two (or 3 or 5 times one)
// or a multiple of 1000 below 16384 when the axis is one symbol.
bool derived_length(int64_t v, int64_t axis);

}  // namespace dvm::graph
