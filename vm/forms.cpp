// The form table's rows.
#include "vm/forms.h"

#include <iterator>

#include "vm/launch.h"
#include "vm/schedule.h"

namespace dvm::vm {
namespace {

constexpr FormRow kRows[] = {
    {Form::Elementwise, 3, ReduceAxis::None, false, false, elementwise_work_items, elementwise_item_elements, nullptr},
    {Form::RowReduce, 3, ReduceAxis::Inner, true, false, row_reduce_work_items, row_reduce_item_elements, row_reduce_splits},
    {Form::ColReduce, 3, ReduceAxis::Outer, false, false, col_reduce_work_items, col_reduce_item_elements, col_reduce_splits},
    {Form::Contraction, 4, ReduceAxis::None, false, true, contraction_work_items, contraction_item_elements, nullptr},
};
static_assert(std::size(kRows) == kNumForms, "one row per form of DVM_FORMS");

constexpr bool rows_in_form_order() {
  for (int i = 0; i < kNumForms; ++i)
    if (static_cast<int>(kRows[i].form) != i || kRows[i].parts < 1 || kRows[i].parts > kMaxParts) return false;
  return true;
}
static_assert(rows_in_form_order(), "row i describes form i, with 1 to kMaxParts parts");

}  // namespace

const FormRow& form_row(Form f) { return kRows[static_cast<int>(f)]; }

}  // namespace dvm::vm
