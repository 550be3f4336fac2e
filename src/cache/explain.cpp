#include "cache/explain.h"

#include <npucache/ir/hash.h>

namespace npucache::cache {
namespace {

template <class T, class Key, class Text>
void compare_lists(const std::vector<T>& stored, const std::vector<T>& now, const char* what, Key key, Text text,
                   std::vector<std::string>& out) {
  for (const T& n : now) {
    const T* s = nullptr;
    for (const T& x : stored)
      if (key(x) == key(n)) s = &x;
    if (!s)
      out.push_back(std::string(what) + " " + key(n) + ": absent stored, " + text(n) + " now");
    else if (text(*s) != text(n))
      out.push_back(std::string(what) + " " + key(n) + ": " + text(*s) + " stored, " + text(n) + " now");
  }
  for (const T& x : stored) {
    bool found = false;
    for (const T& n : now) found = found || key(x) == key(n);
    if (!found) out.push_back(std::string(what) + " " + key(x) + ": " + text(x) + " stored, absent now");
  }
}

}  // namespace

std::vector<std::string> trace_differences(const TraceResult& stored, const TraceResult& now) {
  std::vector<std::string> out;
  if (canonical_hash(stored.graph) != canonical_hash(now.graph)) {
    std::string d = first_difference(stored.graph, now.graph);
    out.push_back("graph: " + (d.empty() ? std::string("the graphs differ") : d));
  }
  compare_lists(
      stored.signature.guards, now.signature.guards, "guard", [](const GuardSpec& g) { return g.path; },
      [](const GuardSpec& g) { return g.value; }, out);
  compare_lists(
      stored.signature.inputs, now.signature.inputs, "input", [](const InputSpec& i) { return i.path; },
      [](const InputSpec& i) { return type_str(i.type); }, out);
  if (stored.signature.shape_guards != now.signature.shape_guards) {
    std::string s, n;
    for (const auto& g : stored.signature.shape_guards) s += (s.empty() ? "" : ", ") + g;
    for (const auto& g : now.signature.shape_guards) n += (n.empty() ? "" : ", ") + g;
    out.push_back("shape guards: [" + s + "] stored, [" + n + "] now");
  }
  if (stored.output_paths != now.output_paths) out.push_back("the result's structure differs");
  return out;
}

}  // namespace npucache::cache
