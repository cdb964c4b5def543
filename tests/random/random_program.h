// Random programs over dvm's public API, an independent reference for them,
// and a runner that checks every tier and ISA: the machinery of
// test_random_programs.cpp.
//
// A Program is a seeded list of ops over symbolic shapes (every extent is an
// expression over a few size variables, 0 and 1 being constants), so the same
// structure can be instantiated at other sizes in the same broadcast classes:
// the plan cache's "twins". The reference evaluates every op in interval
// arithmetic over doubles: each element is a closed interval that must hold
// the float result, widened per op by docs/MATH.md's bounds (correctly
// rounded ops: the rounding of the endpoints; transcendentals: their test
// bound in ULPs at the endpoints; sums: (n-1)u times the sum of magnitudes,
// the bound for any summation order), plus whether NaN may or must come out.
// Bounds compose along the program by construction, cancellation and
// discontinuities (floor, compares, where) included, so a check has no
// tuning tolerance: a value outside its interval is a defect. Products
// (matmul and its spellings) sum K interval products, widened by
// 1.1 K u sum_k max|a_k b_k| plus K 2^-149 for underflow: the bound for any
// order of fused or unfused multiply-adds.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace dvm::random_programs {

// ---------------------------------------------------------------------------
// Programs
// ---------------------------------------------------------------------------
// An extent: a constant, a size variable, a product of two extents (reshape
// merges) or a slice of one.
struct DimExpr {
  enum Kind { Const, Var, Mul, Slice } kind = Const;
  int64_t c = 0;  // Const value; Var index
  int a = -1, b = -1;
  int64_t start = 0, end = 0, step = 1;
};

enum class OpK {
  Leaf,       // from_vector / from_blob / 0-d from_vector
  Full,       // Tensor::full(shape, s)
  Unary,      // sub: UnaryOp
  Binary,     // sub: BinaryOp, tensor operands a, b
  Scalar,     // sub: BinaryOp, a and the float s at position pos
  Compare,    // sub: CmpOp
  Where,      // a: mask, b, c (c < 0: the float s)
  Reduce,     // sub: RedOp over axes (empty: all), keepdim
  Softmax,    // axis; sub 1: log_softmax
  LayerNorm,  // k trailing axes; b weight, c bias (or -1); s eps
  Reshape,    // to shape
  Permute,    // perm (form 1: transpose(perm_a, perm_b))
  Slice,      // axis, start, end, step
  Expand,     // to shape
  Contiguous,
  Sync,       // a.sync(): the value is a itself, now computed
  MatMul,     // a @ b by form: 0 matmul (1-D, 2-D, batch broadcast), 1 bmm,
              // 2 linear(a, b = weight [out, in], c = bias or -1),
              // 3 addmm(c, a, b, beta s, alpha s2)
  Logic,      // sub: LogicOp, a and b (b < 0: unary); a bool result
};

enum UnaryOp { kNeg, kAbs, kExp, kLog, kSqrt, kRsqrt, kRecip, kTanh, kSigmoid, kRelu, kGeluTanh,
               kGeluErf, kErf, kSin, kCos, kFloor, kCeil, kRound, kNumUnary };
// floor_divide and remainder: float operands only (the generator's values are
// float32 and bool; int32 and uint8 ones are tests/tracer/test_int_ops.cpp's).
enum BinaryOp { kAdd, kSub, kMul, kDiv, kMaximum, kMinimum, kPow, kFloorDiv, kRemainder, kNumBinary };
enum CmpOp { kEq, kNe, kLt, kLe, kGt, kGe, kNumCmp };
enum RedOp { kSum, kMax, kMin, kMean, kNumRed };
// Ops with a bool result beside the comparisons. The bitwise ops and bool
// + / * take bool operands (form 0: the function, 1: the operator); the
// logical ops take float or bool ones (nonzero and NaN are true). The first
// kNumBitwise are the tracer's bitwise op kinds; the logical ops and bool
// arithmetic are recorded with other op kinds.
enum LogicOp { kBitAnd, kBitOr, kBitXor, kBitNot, kLogAnd, kLogOr, kLogXor, kLogNot, kBoolAdd, kBoolMul, kNumLogic };
constexpr int kNumBitwise = 4;

struct Op {
  OpK kind = OpK::Leaf;
  int sub = 0;
  int a = -1, b = -1, c = -1;  // operand value ids (value i is op i's result)
  float s = 0;                 // scalar operand, full value or eps
  float s2 = 1;                // MatMul addmm: alpha
  int pos = 1;                 // Scalar: 0 = s op a, 1 = a op s
  int form = 0;                // which API spelling records it
  std::vector<int> shape;      // symbolic result shape (DimExpr ids)
  bool is_bool = false;
  std::vector<int> axes;       // Reduce; Permute
  bool keepdim = false;
  int axis = 0;                // Softmax, Slice; LayerNorm: k
  int64_t start = 0, end = 0, step = 1;
  int data = 0;                // Leaf: value profile
};

struct Program {
  uint64_t seed = 0;
  std::vector<DimExpr> dims;  // 0: const 0, 1: const 1, 2..: the variables
  int nvars = 0;
  std::vector<Op> ops;
  std::vector<int> observed;  // value ids read back with to_vector
};

// Concrete sizes of a program's variables and the seed of its input data.
struct Instance {
  std::vector<int64_t> sizes;
  uint64_t data_seed = 0;
};

Program generate(uint64_t seed);
// Sizes for twin k of p (k = 0: the first instance), keeping every value's
// element count under a budget.
Instance instantiate(const Program& p, int twin);

// ---------------------------------------------------------------------------
// Checking
// ---------------------------------------------------------------------------
struct Outcome {
  std::string failure;  // empty: passed; else what failed, first line the class
  int known_defect = 0; // issue 14 item that the program hits (skipped), or 0
};

struct CheckOptions {
  std::vector<std::string> isas;  // ISAs to run (each on the interpreter and the JIT)
  bool jit = true;
};

// Runs p at instance `in` on every ISA and tier of opts and checks every
// observed value against the reference and the tiers against each other.
Outcome check(const Program& p, const Instance& in, const CheckOptions& opts);

// Shrinks a failing (p, in) while the failure's class stays, and returns the
// C++ reproducer of the smallest one found.
std::string shrink_and_reproduce(Program p, Instance in, const CheckOptions& opts,
                                 const std::string& failure);

// The C++ API code that records p at `in`, with its input data.
std::string to_cpp(const Program& p, const Instance& in);

// How tight the reference was over the elements checked so far: must-NaN,
// exact (a point), within 16 ULPs, wider but finite, unbounded.
std::array<int64_t, 5>& tightness();

// The ISAs this machine runs, lowest first.
std::vector<std::string> available_isas();

}  // namespace dvm::random_programs
