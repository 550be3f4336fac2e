// The first difference between two graphs, in canonical order
// (include/npucache/ir/hash.h): what a cache miss reports when a stored
// program was traced from other code or other values.
#include <npucache/ir/hash.h>

#include "ir/storage_writes.h"

#include <algorithm>
#include <map>

namespace npucache {
namespace {

std::string node_label(const Node& n) { return "node " + n.name + " (" + std::string(op_name(n.op)) + ")"; }

std::string value_text(const AttrValue& v) { return attr_str(v); }

}  // namespace

std::string first_difference(const Graph& stored, const Graph& now) {
  const std::vector<ValueId> a = canonical_order(stored), b = canonical_order(now);
  std::vector<int64_t> ia(stored.size(), -1), ib(now.size(), -1);
  for (std::size_t i = 0; i < a.size(); ++i) ia[static_cast<std::size_t>(a[i])] = static_cast<int64_t>(i);
  for (std::size_t i = 0; i < b.size(); ++i) ib[static_cast<std::size_t>(b[i])] = static_cast<int64_t>(i);
  const StorageWrites wa(stored), wb(now);
  const std::size_t n = std::min(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    const Node& x = stored.node(a[i]);
    const Node& y = now.node(b[i]);
    const std::string label = node_label(y);
    if (x.op != y.op)
      return label + ": " + std::string(op_name(x.op)) + " stored, " + std::string(op_name(y.op)) + " now";
    if (x.op == Op::placeholder && x.kind != y.kind)
      return label + ": a " + std::string(placeholder_kind_name(x.kind)) + " stored, a " +
             std::string(placeholder_kind_name(y.kind)) + " now";
    if (x.inputs.size() != y.inputs.size())
      return label + ": " + std::to_string(x.inputs.size()) + " operands stored, " + std::to_string(y.inputs.size()) +
             " now";
    for (std::size_t k = 0; k < x.inputs.size(); ++k)
      if (ia[static_cast<std::size_t>(x.inputs[k])] != ib[static_cast<std::size_t>(y.inputs[k])])
        return label + ": operand " + std::to_string(k) + " is " + stored.node(x.inputs[k]).name + " stored, " +
               now.node(y.inputs[k]).name + " now";
    // The hash tells a read before a write in place from one after it
    // (encoding 3): say which write the read moved across.
    for (std::size_t k = 0; k < x.inputs.size(); ++k) {
      const std::size_t before = wa.writes_before(static_cast<std::size_t>(a[i]), x.inputs[k]);
      const std::size_t after = wb.writes_before(static_cast<std::size_t>(b[i]), y.inputs[k]);
      if (before != after)
        return label + ": operand " + std::to_string(k) + " (" + now.node(y.inputs[k]).name + ") is read after " +
               std::to_string(before) + " write(s) in place stored, after " + std::to_string(after) +
               " now: the read moved across an update of its storage";
    }
    std::map<std::string, const AttrValue*> xa, ya;
    for (const auto& [k, v] : x.attrs.items()) xa[k] = &v;
    for (const auto& [k, v] : y.attrs.items()) ya[k] = &v;
    for (const auto& [k, v] : ya) {
      auto it = xa.find(k);
      if (it == xa.end()) return label + ": attribute " + k + " absent stored, " + value_text(*v) + " now";
      if (!(*it->second == *v)) {
        if (y.op == Op::full && k == "value")
          return label + ": constant " + value_text(*it->second) + " stored, " + value_text(*v) + " now";
        return label + ": attribute " + k + " " + value_text(*it->second) + " stored, " + value_text(*v) + " now";
      }
    }
    for (const auto& [k, v] : xa)
      if (!ya.count(k)) return label + ": attribute " + k + " " + value_text(*v) + " stored, absent now";
    if (!(x.type == y.type)) return label + ": type " + type_str(x.type) + " stored, " + type_str(y.type) + " now";
  }
  if (a.size() != b.size())
    return "the stored graph has " + std::to_string(a.size()) + " values, this trace " + std::to_string(b.size()) +
           (a.size() < b.size() ? "; first new one: " + node_label(now.node(b[n])) : "");
  // The side-effecting nodes (random draws, sends, receives, updates) run
  // in graph order, and the hash records it.
  std::vector<int64_t> sa, sb;
  for (std::size_t i = 0; i < stored.size(); ++i)
    if (op_info(stored.nodes()[i].op).side_effect && ia[i] >= 0) sa.push_back(ia[i]);
  for (std::size_t i = 0; i < now.size(); ++i)
    if (op_info(now.nodes()[i].op).side_effect && ib[i] >= 0) sb.push_back(ib[i]);
  for (std::size_t k = 0; k < std::min(sa.size(), sb.size()); ++k)
    if (sa[k] != sb[k]) {
      const Node& y = now.node(b[static_cast<std::size_t>(sb[k])]);
      const auto was = std::find(sa.begin(), sa.end(), sb[k]);
      const std::string stored_place =
          was == sa.end() ? "not among them stored" : "number " + std::to_string(was - sa.begin() + 1) + " stored";
      return node_label(y) + ": is number " + std::to_string(k + 1) + " of the " + std::to_string(sb.size()) +
             " side-effecting nodes (random draws, sends, receives, writes in place) now, " + stored_place +
             ": they run in graph order";
    }
  if (stored.outputs().size() != now.outputs().size())
    return std::to_string(stored.outputs().size()) + " outputs stored, " + std::to_string(now.outputs().size()) +
           " now";
  for (std::size_t k = 0; k < stored.outputs().size(); ++k)
    if (ia[static_cast<std::size_t>(stored.outputs()[k])] != ib[static_cast<std::size_t>(now.outputs()[k])])
      return "output " + std::to_string(k) + " is another value";
  return "";
}

}  // namespace npucache
