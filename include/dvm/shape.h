// Shape: up to kMaxRank extents, stored inline so shape inference never
// allocates.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace dvm {

inline constexpr int kMaxRank = 8;
// The most elements a shape may describe (size-0 extents counted as 1, so
// that every axis's contiguous stride is representable): a float buffer of
// that many elements still has a byte count that fits in int64.
inline constexpr int64_t kMaxElements = INT64_MAX / 4;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(const std::vector<int64_t>& dims);

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return d_[i]; }
  int64_t& operator[](int i) { return d_[i]; }
  int64_t numel() const;
  const int64_t* begin() const { return d_; }
  const int64_t* end() const { return d_ + rank_; }
  void push_back(int64_t v);
  std::vector<int64_t> to_vector() const { return {begin(), end()}; }
  std::string to_string() const;  // "[2, 3]"

  friend bool operator==(const Shape& a, const Shape& b) {
    if (a.rank_ != b.rank_) return false;
    for (int i = 0; i < a.rank_; ++i)
      if (a.d_[i] != b.d_[i]) return false;
    return true;
  }

 private:
  int64_t d_[kMaxRank] = {};
  int rank_ = 0;
};

}  // namespace dvm
