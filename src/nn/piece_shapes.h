// Automatic dynamic for the pieces of a method split at graph breaks. A
// piece is recorded with the sizes of its call: its input dims and the
// integers of its shape-valued attributes (a slice's bounds, an attention's
// kv_len, a reshape's target) are constants. A "site" is one such integer:
// {"in<k>", d} is dim d of input k, {"n<i>.<attr>", j} element j of the
// SymExpr-list attribute <attr> of node i. Between two recordings of one
// piece of a method, the sites whose value changed become symbols; the
// general graph then serves every later recording it matches exactly.
#pragma once

#include <npucache/ir/graph.h>
#include <npucache/trace.h>

#include <compare>
#include <optional>
#include <string>
#include <vector>

namespace npucache::nn {

struct PieceSite {
  std::string where;  // "in0", "n7.kv_len"
  int64_t index = 0;  // the dim, or the element
  friend bool operator==(const PieceSite&, const PieceSite&) = default;
  friend auto operator<=>(const PieceSite&, const PieceSite&) = default;
};

// The sites whose value differs between two recordings, in graph order;
// nullopt when they are not one computation at other sizes (another op,
// operand, parameter, attribute or rank).
std::optional<std::vector<PieceSite>> changed_sites(const Graph& before, const Graph& now);

// Every site of `g` (dynamic=true): input dims and integers of
// shape-valued attributes of value >= 2.
std::vector<PieceSite> all_sites(const Graph& g);

// `piece` with the sites `sites` symbolic, its types inferred again.
// Symbols are given by value, so that one recording and one list of sites
// always give one graph: a site takes the symbol of an earlier site of the
// same value, else of the value one below (s + 1) or one above (s - 1),
// else a new one. Sizes below 2 stay constant (a reshape's -1, a slice's
// 0, a head count of 1). A symbol that no
// input dim carries is a SymInt input "sym<k>" of the signature (its value
// comes from match()). nullopt when the graph does not trace with them
// symbolic (a shape check fails) or nothing stays symbolic.
std::optional<TraceResult> generalize(const TraceResult& piece, const std::vector<PieceSite>& sites);

// The sizes at which `general` (from generalize()) is exactly `concrete`:
// the same ops, operands, parameters and attributes, each symbol one value
// throughout, and every node's type `general`'s at those sizes. nullopt
// when it is not. `symints` receives the values of the SymInt inputs in
// signature order.
std::optional<SymBindings> match(const TraceResult& general, const Graph& concrete,
                                 std::vector<std::pair<std::string, int64_t>>* symints = nullptr);

}  // namespace npucache::nn
