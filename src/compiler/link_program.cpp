#include "compiler/link_program.h"

#include <npucache/error.h>
#include <npucache/ir/hash.h>

#include <algorithm>
#include <set>

namespace npucache::compiler {
namespace {

[[noreturn]] void misfit(std::size_t step, const std::string& region, const std::string& what) {
  throw VerifyError("step " + std::to_string(step) + " (region_call of " + region + "): " + what);
}

// Does `e` name a symbol that `sizes` replaces? Most sizes of a region
// (the hidden width, a head count) are constants or name none.
bool mentions(const SymExpr& e, const std::map<std::string, SymExpr>& sizes) {
  for (const auto& [monomial, c] : e.terms())
    for (const auto& s : monomial)
      if (sizes.count(s)) return true;
  return false;
}

// Where a program holds sizes, and nowhere else: its buffers' shapes and
// the vector<SymExpr> values of its steps' attributes (AttrValue's only
// kind that holds a SymExpr). symbols_of, a call's substitution and
// renamed_region all find sizes through these two, so the symbols a link
// checks (renames_only) are the ones it substitutes.
template <class Type, class F>  // f(d) for each size of `t` (a TensorType, const or not)
void for_each_size(Type& t, F&& f) {
  for (auto& d : t.shape) f(d);
}
template <class F>  // f(key, dims) for each attribute of `a` that holds sizes
void for_each_size_attr(const Attrs& a, F&& f) {
  for (const auto& [k, v] : a.items())
    if (const auto* dims = std::get_if<std::vector<SymExpr>>(&v)) f(k, *dims);
}

// `t`, or a step's attributes, with the call's sizes.
void substitute(TensorType& t, const std::map<std::string, SymExpr>& sizes) {
  for_each_size(t, [&](SymExpr& d) {
    if (mentions(d, sizes)) d = d.substitute(sizes);
  });
}

Attrs substitute(const Attrs& a, const std::map<std::string, SymExpr>& sizes) {
  Attrs out = a;
  for_each_size_attr(a, [&](const std::string& k, const std::vector<SymExpr>& dims) {
    if (std::none_of(dims.begin(), dims.end(), [&](const SymExpr& d) { return mentions(d, sizes); })) return;
    std::vector<SymExpr> e;
    e.reserve(dims.size());
    for (const auto& d : dims) e.push_back(mentions(d, sizes) ? d.substitute(sizes) : d);
    out.set(k, std::move(e));
  });
  return out;
}

// Every size of a program with `sizes`.
void substitute(DeviceProgram& p, const std::map<std::string, SymExpr>& sizes) {
  for (auto& b : p.buffers) substitute(b.type, sizes);
  for (auto& st : p.steps) st.attrs = substitute(st.attrs, sizes);
}

// One call being stamped: its region, the body's symbols it binds to other
// sizes (a layer's own KV-cache sizes; empty when all are the body's own)
// and where each of the region's buffers went.
struct Stamp {
  const CompiledRegion* region = nullptr;
  std::map<std::string, SymExpr> sizes;
  std::vector<int> buffer;
  bool renames = true;  // `sizes` only renames symbols: see renames_only
};

// The symbols of a program's sizes.
std::set<std::string> symbols_of(const DeviceProgram& p) {
  std::set<std::string> out;
  auto add = [&](const SymExpr& e) {
    for (const auto& [monomial, c] : e.terms()) out.insert(monomial.begin(), monomial.end());
  };
  for (const auto& b : p.buffers) for_each_size(b.type, add);
  for (const auto& st : p.steps)
    for_each_size_attr(st.attrs, [&](const std::string&, const std::vector<SymExpr>& dims) {
      for (const auto& d : dims) add(d);
    });
  return out;
}

// Whether binding `sizes` to a body of symbols `body`, whose program names
// `used`, only renames them: every size a single symbol, and no two of the
// program's symbols the same after it. A type rule of the IR decides the
// equality and order of dims by their structure and constants, never by a
// symbol's name, so the region's steps type after such a renaming as they
// did before it.
bool renames_only(const std::map<std::string, SymExpr>& sizes, const std::vector<std::string>& body,
                  const std::set<std::string>& used) {
  std::set<std::string> images;
  for (const auto& name : body) {
    const auto it = sizes.find(name);
    const std::string* image = it == sizes.end() ? &name : it->second.symbol_name();
    if (image == nullptr || !images.insert(*image).second) return false;
  }
  for (const auto& name : used)
    if (std::find(body.begin(), body.end(), name) == body.end() && !images.insert(name).second) return false;
  return true;
}

}  // namespace

DeviceProgram link_program(const DeviceProgram& calling, const std::map<std::string, CompiledRegion>& regions,
                           const std::map<std::string, std::vector<std::string>>& symbols, bool memory_planning,
                           ProgramLinkStats* stats) {
  if (stats) stats->typed.clear();
  const std::size_t nb = calling.buffers.size();
  std::vector<int> call_writing(nb, -1);  // the call step whose result each buffer is
  bool any = false;
  for (std::size_t si = 0; si < calling.steps.size(); ++si) {
    const ProgramStep& s = calling.steps[si];
    if (s.op != Op::region_call) continue;
    any = true;
    if (s.result < 0 || static_cast<std::size_t>(s.result) >= nb || call_writing[s.result] >= 0)
      misfit(si, s.attrs.get<std::string>("region"), "its result buffer is out of range or another call's");
    call_writing[static_cast<std::size_t>(s.result)] = static_cast<int>(si);
  }
  if (!any) {  // every step is the calling program's, typed by its validation
    if (stats) stats->typed.assign(calling.steps.size(), 1);
    return calling;
  }

  DeviceProgram out;
  out.parameters = calling.parameters;
  out.num_inputs = calling.num_inputs;
  out.num_streams = calling.num_streams;
  const BufferKind local = memory_planning ? BufferKind::arena : BufferKind::temp;
  auto add = [&](BufferDesc d) {
    out.buffers.push_back(std::move(d));
    return static_cast<int>(out.buffers.size() - 1);
  };

  // Buffers, in the method's order; a call's region buffers just before
  // its result (views only ever name earlier buffers).
  std::vector<int> mapped(nb, -1);
  std::vector<Stamp> stamps(calling.steps.size());
  std::map<std::string, std::set<std::string>> used_symbols;  // per region: symbols_of its program
  for (std::size_t b = 0; b < nb; ++b) {
    BufferDesc d = calling.buffers[b];
    const int c = call_writing[b];
    if (c < 0) {
      if (d.kind == BufferKind::view) d.index = mapped.at(static_cast<std::size_t>(d.index));
      mapped[b] = add(d);
      continue;
    }
    const ProgramStep& call = calling.steps[static_cast<std::size_t>(c)];
    const auto ci = static_cast<std::size_t>(c);
    const std::string& key = call.attrs.get<std::string>("region");
    const auto r = regions.find(key);
    const auto order = symbols.find(key);
    if (r == regions.end() || order == symbols.end()) misfit(ci, key, "the region's program is missing");
    Stamp& st = stamps[ci];
    st.region = &r->second;
    const auto& bind = call.attrs.get<std::vector<SymExpr>>("bind");
    if (bind.size() != order->second.size())
      misfit(
          ci, key,
          "it binds " + std::to_string(bind.size()) + " symbols, its body has " + std::to_string(order->second.size()));
    for (std::size_t k = 0; k < bind.size(); ++k)
      if (!(bind[k] == SymExpr::symbol(order->second[k]))) st.sizes.emplace(order->second[k], bind[k]);
    if (!st.sizes.empty()) {
      auto used = used_symbols.find(key);
      if (used == used_symbols.end()) used = used_symbols.emplace(key, symbols_of(r->second.program)).first;
      st.renames = renames_only(st.sizes, order->second, used->second);
    }
    const DeviceProgram& rp = r->second.program;
    const auto args = static_cast<std::size_t>(call.attrs.get_int("num_args"));
    if (static_cast<std::size_t>(rp.num_inputs) != args || rp.parameters.size() + args != call.operands.size() ||
        rp.outputs.size() != 1)
      misfit(ci, key,
             "it passes " + std::to_string(args) + " arguments and " + std::to_string(call.operands.size() - args) +
                 " parameters; its region's program takes " + std::to_string(rp.num_inputs) + " and " +
                 std::to_string(rp.parameters.size()) + " and gives " + std::to_string(rp.outputs.size()) + " results");
    if (d.kind != BufferKind::arena && d.kind != BufferKind::temp && d.kind != BufferKind::output)
      misfit(ci, key, "its result buffer is not a buffer of its own");
    const int result = rp.outputs.front();
    st.buffer.assign(rp.buffers.size(), -1);
    for (std::size_t rb = 0; rb < rp.buffers.size(); ++rb) {
      BufferDesc x = rp.buffers[rb];
      if (!st.sizes.empty()) substitute(x.type, st.sizes);
      if (x.kind == BufferKind::input || x.kind == BufferKind::parameter) {
        const std::size_t operand =
            x.kind == BufferKind::input ? static_cast<std::size_t>(x.index) : args + static_cast<std::size_t>(x.index);
        const int at = mapped.at(static_cast<std::size_t>(call.operands.at(operand)));
        if (at < 0) misfit(ci, key, "operand " + std::to_string(operand) + " is not computed before the call");
        if (!(out.buffers[static_cast<std::size_t>(at)].type == x.type))
          misfit(ci, key,
                 "operand " + std::to_string(operand) + " is " +
                     type_str(out.buffers[static_cast<std::size_t>(at)].type) + ", its region's program takes " +
                     type_str(x.type));
        st.buffer[rb] = at;
      } else if (x.kind == BufferKind::view) {
        x.index = st.buffer.at(static_cast<std::size_t>(x.index));
        st.buffer[rb] = add(x);
      } else if (static_cast<int>(rb) == result) {
        if (!(x.type == d.type))
          misfit(ci, key, "its result is " + type_str(d.type) + ", its region's program gives " + type_str(x.type));
        st.buffer[rb] = mapped[b] = add(d);  // the region computes straight into the call's result
      } else {
        x.kind = local;
        x.index = -1;
        st.buffer[rb] = add(x);
      }
    }
    if (mapped[b] < 0) {  // the region's result is a view, or one of its operands: the call's result views it
      TensorType t = rp.buffers[static_cast<std::size_t>(result)].type;
      if (!st.sizes.empty()) substitute(t, st.sizes);
      if (!(t == d.type))
        misfit(ci, key, "its result is " + type_str(d.type) + ", its region's program gives " + type_str(t));
      mapped[b] = add({BufferKind::view, st.buffer[static_cast<std::size_t>(result)], d.type});
    }
  }

  // Steps. `ends[s]`: the linked steps that stand for the method's step s
  // (a call: its region's last steps, or what it followed when it has none).
  std::vector<std::vector<int>> ends(calling.steps.size());
  for (std::size_t si = 0; si < calling.steps.size(); ++si) {
    const ProgramStep& s = calling.steps[si];
    std::vector<int> deps;
    for (int d : s.deps)
      for (int e : ends.at(static_cast<std::size_t>(d))) deps.push_back(e);
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    if (s.op != Op::region_call) {
      ProgramStep x = s;
      for (int& o : x.operands) o = mapped.at(static_cast<std::size_t>(o));
      x.result = mapped.at(static_cast<std::size_t>(x.result));
      x.deps = std::move(deps);
      ends[si] = {static_cast<int>(out.steps.size())};
      out.steps.push_back(std::move(x));
      if (stats) stats->typed.push_back(1);
      continue;
    }
    const Stamp& st = stamps[si];
    const DeviceProgram& rp = st.region->program;
    const int base = static_cast<int>(out.steps.size());
    std::vector<char> followed(rp.steps.size(), 0);
    for (const ProgramStep& rs : rp.steps) {
      ProgramStep x;
      x.op = rs.op;
      x.attrs = st.sizes.empty() ? rs.attrs : substitute(rs.attrs, st.sizes);
      for (int o : rs.operands) x.operands.push_back(st.buffer.at(static_cast<std::size_t>(o)));
      x.result = st.buffer.at(static_cast<std::size_t>(rs.result));
      x.stream = rs.stream;
      if (rs.deps.empty()) {
        x.deps = deps;
      } else {
        for (int d : rs.deps) {
          x.deps.push_back(base + d);
          followed.at(static_cast<std::size_t>(d)) = 1;
        }
      }
      out.steps.push_back(std::move(x));
    }
    if (stats) stats->typed.insert(stats->typed.end(), rp.steps.size(), st.renames ? 1 : 0);
    out.num_streams = std::max(out.num_streams, rp.num_streams);
    if (rp.steps.empty()) {
      ends[si] = deps;
    } else {
      for (std::size_t k = 0; k < rp.steps.size(); ++k)
        if (!followed[k]) ends[si].push_back(base + static_cast<int>(k));
    }
    if (stats) {
      ++stats->calls;
      stats->steps += static_cast<int>(rp.steps.size());
    }
  }

  // Outputs numbered again in the order of the outputs, as lowering does.
  for (auto& d : out.buffers)
    if (d.kind == BufferKind::output) d.kind = local, d.index = -1;
  for (int o : calling.outputs) out.add_output(mapped.at(static_cast<std::size_t>(o)));
  return out;
}

CompiledRegion renamed_region(CompiledRegion r, const std::vector<std::string>& from, const Graph& body) {
  const std::vector<std::string> to = canonical_symbols(body);
  if (to.size() != from.size())
    throw VerifyError("a compiled region of " + std::to_string(from.size()) + " symbols for a body of " +
                      std::to_string(to.size()));
  std::map<std::string, SymExpr> names;
  for (std::size_t k = 0; k < to.size(); ++k)
    if (from[k] != to[k]) names.emplace(from[k], SymExpr::symbol(to[k]));
  if (names.empty()) return r;
  substitute(r.program, names);
  r.optimized.substitute_symbols(names);
  return r;
}

}  // namespace npucache::compiler
