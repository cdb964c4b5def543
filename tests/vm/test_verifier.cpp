// Verifier: every malformed program is rejected with a message, and every
// program the encoder writes passes. Also: the disassembler and the kernel
// cache's key.
#include <gtest/gtest.h>

#include <random>

#include "dvm/error.h"
#include "vm/disasm.h"
#include "vm/encoder.h"
#include "vm/forms.h"
#include "vm/kernel_cache.h"
#include "vm/verifier.h"

namespace dvm::vm {
namespace {

Bytecode simple_chain() {
  Encoder e(Form::Elementwise);
  int x = e.add_arg(ArgRole::Input);
  int y = e.add_arg(ArgRole::Output);
  auto v = e.load(Op::LD, x);
  auto c = e.constant(0.5f);
  auto m = e.binary(Op::MUL, v, c);
  auto r = e.unary(Op::RELU, m);
  e.store(Op::ST, y, r);
  return e.finish();
}

// y = x * s0 + s1 with two scalar parameters.
Bytecode with_params() {
  Encoder e(Form::Elementwise);
  int x = e.add_arg(ArgRole::Input);
  int y = e.add_arg(ArgRole::Output);
  auto v = e.load(Op::LD, x);
  auto s0 = e.param();
  auto m = e.binary(Op::MUL, v, s0);
  e.store(Op::ST, y, e.binary(Op::ADD, m, e.param()));
  return e.finish();
}

std::string verify_error(const Bytecode& bc) {
  VerifiedProgram vp;
  std::string err;
  EXPECT_FALSE(verify(bc, &vp, &err)) << "accepted malformed bytecode";
  EXPECT_NE(err.find("bytecode rejected"), std::string::npos) << err;
  return err;
}

// Offset of the first instruction in an encoded program.
size_t code_start(const Bytecode& bc) { return kHeaderFixed + kArgBytes * bc.bytes[6] + 2; }

TEST(Verifier, AcceptsEncoderOutput) {
  VerifiedProgram vp;
  std::string err;
  ASSERT_TRUE(verify(simple_chain(), &vp, &err)) << err;
  EXPECT_EQ(vp.program.code.size(), 5u);
  EXPECT_EQ(vp.info[1].dst_kind, Kind::Row);  // const
  EXPECT_EQ(vp.info[2].dst_kind, Kind::Vec);  // vec * row
}

TEST(Verifier, RejectsBadMagicAndVersion) {
  Bytecode bc = simple_chain();
  bc.bytes[0] = 'X';
  EXPECT_NE(verify_error(bc).find("magic"), std::string::npos);
  bc = simple_chain();
  bc.bytes[3] = kBytecodeVersion + 1;
  EXPECT_NE(verify_error(bc).find("version"), std::string::npos);
}

TEST(Verifier, RejectsUnknownForm) {
  Bytecode bc = simple_chain();
  bc.bytes[4] = 7;
  EXPECT_NE(verify_error(bc).find("form"), std::string::npos);
}

TEST(Verifier, RejectsEveryTruncation) {
  Bytecode full = simple_chain();
  for (size_t n = 0; n < full.bytes.size(); ++n) {
    Bytecode bc;
    bc.bytes.assign(full.bytes.begin(), full.bytes.begin() + static_cast<long>(n));
    std::string err = verify_error(bc);
    EXPECT_NE(err.find("truncated"), std::string::npos) << "length " << n << ": " << err;
  }
}

TEST(Verifier, RejectsTrailingBytes) {
  Bytecode bc = simple_chain();
  bc.bytes.push_back(0);
  EXPECT_NE(verify_error(bc).find("trailing"), std::string::npos);
}

TEST(Verifier, RejectsUnknownOpcode) {
  Bytecode bc = simple_chain();
  bc.bytes[code_start(bc)] = static_cast<uint8_t>(kNumOps);
  EXPECT_NE(verify_error(bc).find("unknown opcode"), std::string::npos);
}

TEST(Verifier, RejectsRegisterOutOfRange) {
  Bytecode bc = simple_chain();
  bc.bytes[code_start(bc) + 1] = 200;  // ld's destination
  EXPECT_NE(verify_error(bc).find("out of range"), std::string::npos);
}

TEST(Verifier, RejectsArgumentOutOfRange) {
  Bytecode bc = simple_chain();
  bc.bytes[code_start(bc) + 2] = 9;  // ld's argument
  EXPECT_NE(verify_error(bc).find("argument 9 out of range"), std::string::npos);
}

TEST(Verifier, AcceptsScalarParameters) {
  VerifiedProgram vp;
  std::string err;
  const Bytecode bc = with_params();
  ASSERT_TRUE(verify(bc, &vp, &err)) << err;
  EXPECT_EQ(bc.bytes[7] | bc.bytes[8] << 8, 2);  // the header's scalar count
  EXPECT_EQ(vp.program.code[1].scalar, 0);
  EXPECT_EQ(vp.program.code[3].scalar, 1);
  EXPECT_EQ(vp.program.nscalars, 2);
  EXPECT_EQ(vp.program.code[1].op, Op::PARAM);
  EXPECT_EQ(vp.info[1].dst_kind, Kind::Row);  // uniform, like a constant
  EXPECT_EQ(encode(vp.program), bc);
}

TEST(Verifier, RejectsScalarIndexOutOfRange) {
  // param r1, s0 is the second instruction: opcode, register, scalar index
  // (two bytes, little-endian).
  Bytecode bc = with_params();
  const size_t param_at = code_start(bc) + 3;
  ASSERT_EQ(bc.bytes[param_at], static_cast<uint8_t>(Op::PARAM));
  bc.bytes[param_at + 2] = 2;
  EXPECT_NE(verify_error(bc).find("instruction 1 (param): scalar parameter s2 out of range (kernel has 2)"),
            std::string::npos)
      << verify_error(bc);
  bc.bytes[param_at + 2] = 0;
  bc.bytes[param_at + 3] = 1;
  EXPECT_NE(verify_error(bc).find("s256 out of range"), std::string::npos);
  // A header that declares fewer scalars than the code reads.
  bc = with_params();
  bc.bytes[7] = 1;
  EXPECT_NE(verify_error(bc).find("scalar parameter s1 out of range (kernel has 1)"), std::string::npos);
  bc.bytes[7] = 0;
  EXPECT_NE(verify_error(bc).find("scalar parameter s0 out of range (kernel has 0)"), std::string::npos);
  // A truncated index.
  bc = with_params();
  bc.bytes.resize(param_at + 3);
  EXPECT_NE(verify_error(bc).find("truncated: scalar index"), std::string::npos);
}

TEST(Verifier, RejectsReadOfUnwrittenRegister) {
  // relu r1, r0 with nothing written before.
  Bytecode bc;
  bc.bytes = {'D', 'V', 'M', kBytecodeVersion, 0, 2, 1, 0, 0, 1, static_cast<uint8_t>(Dtype::F32), 2, 0};
  bc.bytes.push_back(static_cast<uint8_t>(Op::RELU));
  bc.bytes.push_back(1);
  bc.bytes.push_back(0);
  bc.bytes.push_back(static_cast<uint8_t>(Op::ST));
  bc.bytes.push_back(0);
  bc.bytes.push_back(1);
  EXPECT_NE(verify_error(bc).find("before it is written"), std::string::npos);
}

TEST(Verifier, RejectsWrongArgumentRoles) {
  // Load from an output.
  Encoder e(Form::Elementwise);
  int in = e.add_arg(ArgRole::Input);
  int out = e.add_arg(ArgRole::Output);
  e.store(Op::ST, out, e.load(Op::LD, in));
  Bytecode bc = e.finish();
  Bytecode swapped = bc;
  swapped.bytes[kHeaderFixed] = 1;              // a0 becomes an output
  swapped.bytes[kHeaderFixed + kArgBytes] = 0;  // a1 becomes an input
  EXPECT_NE(verify_error(swapped).find("which is an output"), std::string::npos);
  // An output nobody stores.
  Encoder e2(Form::Elementwise);
  int i2 = e2.add_arg(ArgRole::Input);
  int o2 = e2.add_arg(ArgRole::Output);
  e2.add_arg(ArgRole::Output);
  e2.store(Op::ST, o2, e2.load(Op::LD, i2));
  EXPECT_NE(verify_error(e2.finish()).find("never stored"), std::string::npos);
  // An output stored twice.
  Encoder e3(Form::Elementwise);
  int i3 = e3.add_arg(ArgRole::Input);
  int o3 = e3.add_arg(ArgRole::Output);
  auto v3 = e3.load(Op::LD, i3);
  e3.store(Op::ST, o3, v3);
  e3.store(Op::ST, o3, e3.unary(Op::NEG, v3));
  EXPECT_NE(verify_error(e3.finish()).find("stores output argument 1 a second time"), std::string::npos);
}

TEST(Verifier, RejectsBadRoleByte) {
  Bytecode bc = simple_chain();
  bc.bytes[kHeaderFixed] = 5;
  EXPECT_NE(verify_error(bc).find("unknown role"), std::string::npos);
}

// Each argument's element type is in the header, beside its role: part of
// the kernel's identity, decoded as written, and checked.
TEST(Verifier, ArgumentTypesAreInTheHeader) {
  const Bytecode bc = simple_chain();
  const size_t type_byte = kHeaderFixed + 1;  // a0's type
  ASSERT_EQ(bc.bytes[type_byte], static_cast<uint8_t>(Dtype::F32));
  VerifiedProgram vp;
  std::string err;
  ASSERT_TRUE(verify(bc, &vp, &err)) << err;
  EXPECT_EQ(vp.program.types, (std::vector<Dtype>{Dtype::F32, Dtype::F32}));
  EXPECT_EQ(encode(vp.program), bc);
  for (Dtype t : {Dtype::F16, Dtype::BF16, Dtype::I32, Dtype::Bool, Dtype::I64, Dtype::U8}) {
    Bytecode typed = bc;
    typed.bytes[type_byte] = static_cast<uint8_t>(t);
    // Another type is another kernel, decoded as written.
    EXPECT_NE(typed.hash(), bc.hash()) << elem_name(t);
    ASSERT_TRUE(verify(typed, &vp, &err)) << err;
    EXPECT_EQ(vp.program.types[0], t);
    EXPECT_EQ(encode(vp.program), typed);
  }
  Bytecode unknown = bc;
  unknown.bytes[type_byte] = kNumElemTypes;
  EXPECT_NE(verify_error(unknown).find("unknown element type"), std::string::npos);
}

TEST(Verifier, RejectsFormRules) {
  // A reduction in an elementwise kernel.
  {
    Encoder e(Form::Elementwise);
    int in = e.add_arg(ArgRole::Input), out = e.add_arg(ArgRole::Output);
    e.store(Op::ST, out, e.reduce(Op::RSUM, e.load(Op::LD, in)));
    EXPECT_NE(verify_error(e.finish()).find("reductions are not allowed in elementwise"), std::string::npos);
  }
  // stb of a vec value.
  {
    Encoder e(Form::RowReduce);
    int in = e.add_arg(ArgRole::Input), out = e.add_arg(ArgRole::Output), o2 = e.add_arg(ArgRole::Output);
    auto v = e.load(Op::LD, in);
    e.store(Op::STB, out, e.reduce(Op::RSUM, v));
    e.store(Op::STB, o2, v);
    EXPECT_NE(verify_error(e.finish()).find("needs a row value"), std::string::npos);
  }
  // A reduce kernel without a reduction.
  {
    Encoder e(Form::RowReduce);
    int in = e.add_arg(ArgRole::Input), out = e.add_arg(ArgRole::Output);
    e.store(Op::ST, out, e.load(Op::LD, in));
    EXPECT_NE(verify_error(e.finish()).find("has no reduction"), std::string::npos);
  }
  // A ColReduce epilogue reading a prologue value.
  {
    Encoder e(Form::ColReduce);
    int in = e.add_arg(ArgRole::Input), out = e.add_arg(ArgRole::Output);
    auto v = e.load(Op::LD, in);
    auto s = e.reduce(Op::RSUM, v);
    e.store(Op::ST, out, e.binary(Op::ADD, s, v));
    EXPECT_NE(verify_error(e.finish()).find("epilogue"), std::string::npos);
  }
  // ColReduce reducing a reduced value.
  {
    Encoder e(Form::ColReduce);
    int in = e.add_arg(ArgRole::Input), out = e.add_arg(ArgRole::Output);
    e.store(Op::ST, out, e.reduce(Op::RSUM, e.reduce(Op::RSUM, e.load(Op::LD, in))));
    EXPECT_NE(verify_error(e.finish()).find("reduced value"), std::string::npos);
  }
}

bool accepted(const Bytecode& bc) {
  VerifiedProgram vp;
  std::string err;
  return verify(bc, &vp, &err);
}

// The form table's verify rules, form by form: each kernel shape below is
// accepted exactly when the form's row allows it.
TEST(Verifier, FollowsEachFormsRow) {
  for (int f = 0; f < kNumForms; ++f) {
    const Form form = static_cast<Form>(f);
    const FormRow& row = form_row(form);
    EXPECT_EQ(row.form, form);
    EXPECT_STRNE(form_name(form), "?");
    // A plain copy: a form without reductions accepts it, the others need one.
    {
      Encoder e(form);
      int in = e.add_arg(ArgRole::Input), out = e.add_arg(ArgRole::Output);
      e.store(Op::ST, out, e.load(Op::LD, in));
      EXPECT_EQ(accepted(e.finish()), row.reduces == ReduceAxis::None && !row.contracts) << form_name(form);
    }
    // A product stored: only where the form contracts; a second is never allowed.
    {
      Encoder e(form);
      int a = e.add_arg(ArgRole::Input), b = e.add_arg(ArgRole::Input), out = e.add_arg(ArgRole::Output);
      e.store(Op::ST, out, e.mma(a, b));
      EXPECT_EQ(accepted(e.finish()), row.contracts && row.reduces == ReduceAxis::None) << form_name(form);
      Encoder twice(form);
      a = twice.add_arg(ArgRole::Input), b = twice.add_arg(ArgRole::Input), out = twice.add_arg(ArgRole::Output);
      twice.store(Op::ST, out, twice.binary(Op::ADD, twice.mma(a, b), twice.mma(b, a)));
      EXPECT_FALSE(accepted(twice.finish())) << form_name(form);
      Encoder from_output(form);
      a = from_output.add_arg(ArgRole::Input), out = from_output.add_arg(ArgRole::Output);
      from_output.store(Op::ST, out, from_output.mma(a, out));
      EXPECT_FALSE(accepted(from_output.finish())) << form_name(form);
    }
    // A sum stored per element.
    {
      Encoder e(form);
      int in = e.add_arg(ArgRole::Input), out = e.add_arg(ArgRole::Output);
      e.store(Op::ST, out, e.reduce(Op::RSUM, e.load(Op::LD, in)));
      EXPECT_EQ(accepted(e.finish()), row.reduces != ReduceAxis::None) << form_name(form);
    }
    // A sum stored once per row.
    {
      Encoder e(form);
      int in = e.add_arg(ArgRole::Input), out = e.add_arg(ArgRole::Output);
      e.store(Op::STB, out, e.reduce(Op::RSUM, e.load(Op::LD, in)));
      const bool ok = row.row_stores && row.reduces == ReduceAxis::Inner;
      EXPECT_EQ(accepted(e.finish()), ok) << form_name(form);
    }
    // A sum of a sum: only inner reductions chain.
    {
      Encoder e(form);
      int in = e.add_arg(ArgRole::Input), out = e.add_arg(ArgRole::Output);
      e.store(Op::ST, out, e.reduce(Op::RSUM, e.reduce(Op::RSUM, e.load(Op::LD, in))));
      EXPECT_EQ(accepted(e.finish()), row.reduces == ReduceAxis::Inner) << form_name(form);
    }
  }
}

// Random byte strings and random single-byte mutations must never crash the
// verifier; whatever it accepts must decode to the same instruction count.
TEST(Verifier, FuzzNeverCrashes) {
  std::mt19937 rng(1234);
  const Bytecode bases[] = {simple_chain(), with_params()};
  int accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    Bytecode bc = bases[iter % 2];
    int flips = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < flips; ++f) bc.bytes[rng() % bc.bytes.size()] = static_cast<uint8_t>(rng());
    if (iter % 4 == 0) bc.bytes.resize(rng() % (bc.bytes.size() + 4), 0);
    VerifiedProgram vp;
    std::string err;
    if (verify(bc, &vp, &err)) {
      ++accepted;
      EXPECT_EQ(encode(vp.program), bc);  // what it accepted is exactly what it decoded
    } else {
      EXPECT_FALSE(err.empty());
    }
  }
  EXPECT_LT(accepted, 20000);
}

TEST(Disassembler, ListsEveryInstruction) {
  std::string text = disassemble(simple_chain());
  EXPECT_NE(text.find("kernel elementwise regs="), std::string::npos) << text;
  EXPECT_NE(text.find("(in a0:f32, out a1:f32)"), std::string::npos) << text;
  EXPECT_NE(text.find("ld"), std::string::npos);
  EXPECT_NE(text.find("const"), std::string::npos);
  EXPECT_NE(text.find("0.5"), std::string::npos);
  EXPECT_NE(text.find("relu"), std::string::npos);
  EXPECT_NE(text.find("st"), std::string::npos);
  Bytecode bad = simple_chain();
  bad.bytes.pop_back();
  EXPECT_NE(disassemble(bad).find("<invalid"), std::string::npos);
  text = disassemble(with_params());
  EXPECT_NE(text.find("(in a0:f32, out a1:f32) scalars=2 instrs=6"), std::string::npos) << text;
  EXPECT_NE(text.find("param    r1, s0"), std::string::npos) << text;
  EXPECT_NE(text.find(", s1"), std::string::npos) << text;
}

TEST(Encoder, ReusesDeadRegisters) {
  // A chain of 50 unary ops needs two registers, not 50.
  Encoder e(Form::Elementwise);
  int in = e.add_arg(ArgRole::Input), out = e.add_arg(ArgRole::Output);
  auto v = e.load(Op::LD, in);
  for (int i = 0; i < 50; ++i) v = e.unary(Op::NEG, v);
  e.store(Op::ST, out, v);
  Bytecode bc = e.finish();
  EXPECT_LE(bc.bytes[5], 2);
  VerifiedProgram vp;
  std::string err;
  EXPECT_TRUE(verify(bc, &vp, &err)) << err;
}

TEST(KernelCache, KeyIsTheBytecode) {
  KernelCache& cache = KernelCache::global();
  auto a = cache.get(simple_chain());
  auto b = cache.get(simple_chain());
  EXPECT_EQ(a.get(), b.get());
  // A different immediate is a different kernel.
  Encoder e(Form::Elementwise);
  int x = e.add_arg(ArgRole::Input), y = e.add_arg(ArgRole::Output);
  e.store(Op::ST, y, e.unary(Op::RELU, e.binary(Op::MUL, e.load(Op::LD, x), e.constant(0.25f))));
  auto c = cache.get(e.finish());
  EXPECT_NE(a.get(), c.get());
  // A scalar parameter's value is not in the bytecode: one kernel for any.
  EXPECT_EQ(cache.get(with_params()).get(), cache.get(with_params()).get());
  // Malformed bytecode never enters the cache.
  Bytecode bad = simple_chain();
  bad.bytes[0] = 0;
  int64_t before = cache.size();
  EXPECT_THROW(cache.get(bad), Error);
  EXPECT_EQ(cache.size(), before);
}

}  // namespace
}  // namespace dvm::vm

namespace dvm::vm {
namespace {

// int32 lanes: the I* ops read int32 lanes (int32-lane loads, ftoi, other I*
// ops, constants), float ops f32 lanes; stores match their argument.
TEST(Verifier, Int32LanesKeepIntegerAndFloatValuesApart) {
  auto build = [](bool int_in, bool int_out, auto body) {
    Encoder e(Form::Elementwise);
    const int x = e.add_arg(ArgRole::Input, Dtype::I32, int_in);
    const int o = e.add_arg(ArgRole::Output, Dtype::I32, int_out);
    e.store(Op::ST, o, body(e, e.load(Op::LD, x)));
    return e.finish();
  };
  VerifiedProgram vp;
  std::string err;
  // Accepted: integer arithmetic on int32 lanes with a constant, compared
  // (f32 0/1), converted back; a float op on an itof.
  EXPECT_TRUE(verify(build(true, true, [](Encoder& e, Encoder::Value v) {
                       const auto s = e.binary(Op::IMUL, e.binary(Op::IADD, v, e.constant(0.0f)), v);
                       return e.ternary(Op::SELECT, e.binary(Op::ILT, s, v), s, e.unary(Op::INEG, v));
                     }),
                     &vp, &err))
      << err;
  EXPECT_TRUE(verify(build(true, false, [](Encoder& e, Encoder::Value v) { return e.unary(Op::EXP, e.unary(Op::ITOF, v)); }),
                     &vp, &err))
      << err;
  EXPECT_TRUE(verify(build(false, true, [](Encoder& e, Encoder::Value v) { return e.unary(Op::FTOI, v); }), &vp, &err))
      << err;
  // Rejected: an I* op on f32 lanes, a float op on int32 lanes, a store of
  // the wrong lanes, the flag on an int64 argument or a floating input.
  EXPECT_FALSE(verify(build(false, true, [](Encoder& e, Encoder::Value v) { return e.binary(Op::IADD, v, v); }), &vp, &err));
  EXPECT_NE(err.find("f32 lanes"), std::string::npos) << err;
  EXPECT_FALSE(verify(build(true, true, [](Encoder& e, Encoder::Value v) { return e.binary(Op::ADD, v, v); }), &vp, &err));
  EXPECT_NE(err.find("int32 lanes"), std::string::npos) << err;
  EXPECT_FALSE(verify(build(true, false, [](Encoder&, Encoder::Value v) { return v; }), &vp, &err));
  EXPECT_FALSE(verify(build(false, true, [](Encoder&, Encoder::Value v) { return v; }), &vp, &err));
  {
    Encoder e(Form::Elementwise);
    const int x = e.add_arg(ArgRole::Input, Dtype::F32, true), o = e.add_arg(ArgRole::Output, Dtype::I32, true);
    e.store(Op::ST, o, e.load(Op::LD, x));
    EXPECT_FALSE(verify(e.finish(), &vp, &err));
    EXPECT_NE(err.find("cannot move integer lanes"), std::string::npos) << err;
  }
}

// int64 lanes: an int64 argument with kIntLanes loads and stores them, the
// L* ops read them, itol and ltoi convert from and to int32 lanes, and
// nothing else reads or writes them (a constant's 4 bytes are no int64).
TEST(Verifier, Int64LanesKeepTheirWidth) {
  // x: an int64 input with int64 lanes, y: an int32 input with int32 lanes;
  // the program stores body's value to an output of type `out` (lanes when
  // out_lanes).
  auto build = [](Dtype out, bool out_lanes, auto body) {
    Encoder e(Form::Elementwise);
    const int x = e.add_arg(ArgRole::Input, Dtype::I64, true), y = e.add_arg(ArgRole::Input, Dtype::I32, true);
    const int o = e.add_arg(ArgRole::Output, out, out_lanes);
    e.store(Op::ST, o, body(e, e.load(Op::LD, x), e.load(Op::LD, y)));
    return e.finish();
  };
  VerifiedProgram vp;
  std::string err;
  using V = Encoder::Value;
  EXPECT_TRUE(verify(build(Dtype::I64, true, [](Encoder& e, V x, V y) {
                       const V s = e.binary(Op::LMUL, e.binary(Op::LADD, x, e.unary(Op::ITOL, y)), x);
                       const V z = e.unary(Op::ITOL, e.constant(0.0f));
                       return e.ternary(Op::LSELECT, e.binary(Op::LLT, s, z), s, e.unary(Op::LNEG, x));
                     }),
                     &vp, &err))
      << err;
  EXPECT_TRUE(vp.int64_lanes);
  EXPECT_TRUE(verify(build(Dtype::I32, true, [](Encoder& e, V x, V y) { return e.binary(Op::IADD, e.unary(Op::LTOI, x), y); }),
                     &vp, &err))
      << err;
  EXPECT_TRUE(verify(build(Dtype::F32, false, [](Encoder& e, V x, V) { return e.unary(Op::EXP, e.unary(Op::LTOF, x)); }),
                     &vp, &err))
      << err;
  // Rejected: int64 lanes read by an int32 op, a float op, select or a
  // store of other lanes; an L op on int32 lanes or on a constant.
  struct Bad {
    const char* what;
    Dtype out;
    bool out_lanes;
    V (*body)(Encoder&, V, V);
    const char* says;
  };
  const Bad bad[] = {
      {"iadd of int64", Dtype::I32, true, [](Encoder& e, V x, V y) { return e.binary(Op::IADD, x, y); }, "int64 lanes"},
      {"exp of int64", Dtype::F32, false, [](Encoder& e, V x, V) { return e.unary(Op::EXP, x); }, "int64 lanes"},
      {"select of int64", Dtype::I64, true,
       [](Encoder& e, V x, V) { return e.ternary(Op::SELECT, e.unary(Op::LTOF, x), x, x); }, "int64 lanes"},
      {"int64 stored as int32", Dtype::I32, true, [](Encoder&, V x, V) { return x; }, "int64 lanes"},
      {"int32 stored as int64", Dtype::I64, true, [](Encoder&, V, V y) { return y; }, "int32 lanes"},
      {"ladd of int32", Dtype::I64, true, [](Encoder& e, V x, V y) { return e.binary(Op::LADD, x, y); }, "int32 lanes"},
      {"ladd of a constant", Dtype::I64, true, [](Encoder& e, V x, V) { return e.binary(Op::LADD, x, e.constant(1.0f)); },
       "a constant"},
      {"lselect of an int64 mask", Dtype::I64, true, [](Encoder& e, V x, V) { return e.ternary(Op::LSELECT, x, x, x); },
       "int64 lanes"},
  };
  for (const Bad& b : bad) {
    EXPECT_FALSE(verify(build(b.out, b.out_lanes, b.body), &vp, &err)) << b.what;
    EXPECT_NE(err.find(b.says), std::string::npos) << b.what << ": " << err;
  }
}

// Operand prologues (ldoa, ldob, mmar): each space's values stay in it.
// Accepted: prologues on either operand with constants and parameters, one
// of them a lone load, a constant operand. Rejected: operand loads outside
// a Contraction, an op mixing two spaces, an epilogue reading a prologue's
// value, a prologue's value stored, an mmar operand from the wrong space.
TEST(Verifier, OperandProloguesKeepTheirSpaces) {
  struct Regs {
    Encoder::Value la, lb, out_load;
    int y;
  };
  // fn builds the program from a's and b's operand loads and an epilogue
  // load; it returns false when it stored y itself.
  auto build = [](Form form, auto fn) {
    Encoder e(form);
    const int a = e.add_arg(ArgRole::Input), b = e.add_arg(ArgRole::Input), c = e.add_arg(ArgRole::Input),
              y = e.add_arg(ArgRole::Output);
    Regs r{e.load(Op::LDOA, a), e.load(Op::LDOB, b), e.load(Op::LD, c), y};
    fn(e, r);
    return e.finish();
  };
  const Form kC = Form::Contraction;
  VerifiedProgram vp;
  std::string err;
  const Bytecode both = build(kC, [](Encoder& e, const Regs& r) {
    const auto pa = e.binary(Op::MUL, r.la, e.param()), pb = e.unary(Op::EXP, e.binary(Op::ADD, r.lb, e.constant(1)));
    e.store(Op::ST, r.y, e.binary(Op::ADD, e.mma_values(pa, pb), r.out_load));
  });
  ASSERT_TRUE(verify(both, &vp, &err)) << err;
  EXPECT_EQ(vp.info[0].space, kOperandA);
  EXPECT_EQ(vp.info[1].space, kOperandB);
  EXPECT_EQ(vp.info[2].space, kOutSpace);
  EXPECT_TRUE(accepted(build(kC, [](Encoder& e, const Regs& r) { e.store(Op::ST, r.y, e.mma_values(r.la, r.lb)); })));
  EXPECT_TRUE(accepted(build(kC, [](Encoder& e, const Regs& r) {
    e.store(Op::ST, r.y, e.binary(Op::ADD, e.mma_values(e.param(), r.lb), r.out_load));
  })));
  struct Bad {
    Form form;
    const char* expect;
    void (*fn)(Encoder&, const Regs&);
  };
  const Bad bad[] = {
      {Form::Elementwise, "only in contraction kernels",
       [](Encoder& e, const Regs& r) { e.store(Op::ST, r.y, e.binary(Op::ADD, r.la, r.out_load)); }},
      {kC, "with a value of another space",
       [](Encoder& e, const Regs& r) { e.store(Op::ST, r.y, e.mma_values(e.binary(Op::MUL, r.la, r.lb), r.lb)); }},
      {kC, "with a value of another space",
       [](Encoder& e, const Regs& r) {
         e.store(Op::ST, r.y, e.binary(Op::ADD, e.mma_values(r.la, r.lb), e.binary(Op::ADD, r.out_load, r.la)));
       }},
      {kC, "only values over [P, R, C] are stored", [](Encoder& e, const Regs& r) {
         e.mma_values(r.la, r.lb);
         e.store(Op::ST, r.y, r.la);
       }},
      {kC, "operand a is", [](Encoder& e, const Regs& r) { e.store(Op::ST, r.y, e.mma_values(r.lb, r.lb)); }},
      {kC, "operand b is", [](Encoder& e, const Regs& r) { e.store(Op::ST, r.y, e.mma_values(r.la, r.out_load)); }},
  };
  for (const Bad& x : bad) {
    const std::string why = verify_error(build(x.form, x.fn));
    EXPECT_NE(why.find(x.expect), std::string::npos) << why;
  }
}

}  // namespace
}  // namespace dvm::vm
