// A call's binding against a trace's signature from a flat table made once.
//
// InputSignature::bind checks every dim of every input by reading its
// symbolic expression and binds the symbols into a map as it goes. A
// BindPlan reads the signature once: each dim becomes a slot of a flat
// table of symbols (a few, named by many dims), a constant, or an
// expression checked after the symbols are bound. bind() then checks and
// binds a call with vectors indexed by position and builds the bindings
// map once, in order.
//
// Contract: bind(args) returns what signature.bind(args) returns and throws
// the same TraceError (same first mismatch, same message) for every call.
// The plan reads the signature it was made from on every call: that
// signature must outlive the plan and must not change after it is made.
// Thread-safe (bind is const and keeps nothing).
#pragma once

#include <npucache/trace.h>

#include <cstdint>
#include <string>
#include <vector>

namespace npucache::nn {

class BindPlan {
 public:
  explicit BindPlan(const InputSignature& signature);
  SymBindings bind(const FlatArgs& args) const;

 private:
  // A dim: a symbol's slot (>= 0), or kChecked (a constant or an
  // expression, checked once the symbols are bound).
  static constexpr int32_t kChecked = -1;
  const InputSignature& sig_;
  std::vector<std::string> names_;   // the symbols, sorted
  std::vector<int32_t> dims_;        // every input's dims in order
  std::vector<std::size_t> first_;   // per input: its first entry in dims_
  std::vector<int32_t> sym_inputs_;  // per SymInt input: its slot or kChecked
  // Per dim bound, each side read from the table when it is a symbol or a
  // constant (else evaluated): a slot, or kConstant with its value.
  static constexpr int32_t kConstant = -2;
  struct Side {
    int32_t slot = kChecked;
    int64_t value = 0;
  };
  std::vector<std::pair<Side, Side>> bounds_;
};

}  // namespace npucache::nn
