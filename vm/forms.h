// The form table: one row per kernel form (vm/bytecode.h: DVM_FORMS) with
// what the verifier asks of the form's programs and how its launches are
// scheduled and costed. Backends keep their own per-form entries (the
// interpreter's drivers, the JIT's lowering), each a table of kNumForms
// checked at compile time, so a new form is a new row plus its own files.
#pragma once

#include <cstdint>

#include "vm/bytecode.h"

namespace dvm::vm {

class Kernel;
struct Launch;

// Which axis a form's reductions fold, if it has any.
enum class ReduceAxis : uint8_t {
  None,   // reductions are rejected
  Inner,  // fold C: one value per row; a reduced value may be reduced again
  Outer,  // fold R: keeps the C variation; one block of reductions between a
          // prologue (per row) and an epilogue (once per column)
};

struct FormRow {
  Form form;
  // Parts of the iteration space it uses (vm/launch.h: at most kMaxParts):
  // three, [P, R, C], for the vector forms; Contraction adds K.
  int parts;
  // Verify rules.
  ReduceAxis reduces;  // None: no reductions; otherwise at least one
  bool row_stores;     // stb (one value per row) is allowed
  bool contracts;      // exactly one mma (the cube unit); elsewhere none
  // Schedule (vm/schedule.h): work items of a launch, floats one item
  // touches (the parallel cost model's unit), and whether a launch splits its
  // reduced axis into chunks (null: never).
  int64_t (*work_items)(const Kernel& k, const Launch& l);
  int64_t (*item_elements)(const Kernel& k, const Launch& l);
  bool (*splits)(const Kernel& k, const Launch& l);
};

const FormRow& form_row(Form f);

}  // namespace dvm::vm
