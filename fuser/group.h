// Fused groups: what the partition pass produces and the later passes
// (lowering, binding, execution) consume.
#pragma once

#include <cstdint>
#include <vector>

#include "dvm/shape.h"
#include "tracer/node.h"
#include "vm/bytecode.h"

namespace dvm::fuser {

// Where a member's values live in its group's iteration space.
//   Full:    one value per element of the group's full shape F.
//   Reduced: one value per element of F with the reduced axes folded
//            (a reduction result, or an op on reduction results).
enum class Domain : uint8_t { Full = 0, Reduced = 1 };

struct Group {
  vm::Form form = vm::Form::Elementwise;
  Shape full;             // F: the shape every Full member has
  int red_begin = 0;      // reduced axes of F are [red_begin, red_end)
  int red_end = 0;
  std::vector<detail::Node*> members;  // a topological order
  std::vector<int> deps;  // groups whose outputs this group reads
  bool alive = true;      // false once merged into another group...
  int merged_into = -1;   // ...this one
};

// Where partition put one node of the flush. Kept per node, indexed by
// Node::index (the node's position in the flushed list).
struct Placement {
  int32_t group = -1;             // fused group, -1 for none (views)
  Domain domain = Domain::Full;   // within the group
  bool output = false;            // stored by its group (observed or read elsewhere)
};

struct Plan {
  std::vector<Group> groups;         // dead (merged) groups included
  std::vector<int> order;            // live groups, dependencies first
  std::vector<Placement> placement;  // per node of the flush
};

// True when s is F with the axes [a, b) removed or kept as size 1.
bool is_reduced_shape(const Shape& s, const Shape& full, int a, int b);

}  // namespace dvm::fuser
