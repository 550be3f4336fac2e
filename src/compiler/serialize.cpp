// Serialization of compiled results in npucache's bounded binary encoding
// (compiler/wire.h). Deterministic: equal values give equal bytes. Every
// enum and index read back is range-checked, every count is checked against
// the bytes left before anything is allocated, and the result is verified
// (the graph by the IR verifier, the program by validate_program), so
// damaged or hostile bytes give an Error, never a crash.
#include "compiler/serialize.h"

#include <npucache/error.h>
#include <npucache/ir/hash.h>

#include "compiler/link_program.h"
#include "compiler/validate.h"
#include "compiler/wire.h"

namespace npucache::compiler {
namespace {

// Bump when the encoding changes; a reader refuses other versions.
// 2: autotune decisions say what they were timed on.
// 4: SymInt inputs in the signature; the config's autotune and
//    eager_kernels.
// 5: ops are stored by their pinned numbers (op.h), erf among them.
// 6: a trace carries the bodies of the compile regions it calls.
// 7: a record stores the method's program with its region calls and each
//    region's program once (linked when loaded), not the linked program.
// 8: region bodies are named by canonical hash encoding 3 (ir/hash.cpp:
//    writes in place and ordered nodes), so 7's names are not this build's.
constexpr uint32_t kEncodingVersion = 8;
constexpr uint32_t kGraphMagic = 0x4350554e;   // "NUPC"
constexpr uint32_t kRegionMagic = 0x5250554e;  // "NUPR"

// Smallest encodings, for the count checks (a count claiming more items
// than the remaining bytes could hold is refused before allocating).
constexpr std::size_t kMinDim = 1 + 8;
constexpr std::size_t kMinNode = 1 + 4 + 4 + 1 + 4 + 4 + 1 + 4;
constexpr std::size_t kMinStep = 1 + 4 + 4 + 4 + 4 + 4;

template <class E>
E enum_in(ByteReader& r, uint32_t count, const char* what) {
  const uint32_t v = r.u32();
  if (v >= count) r.fail(std::string(what) + " value " + std::to_string(v) + " is out of range");
  return static_cast<E>(v);
}

// An op by its pinned number (op_number in op.h).
Op op_in(ByteReader& r) {
  const uint32_t v = r.u32();
  if (!is_op_number(v)) r.fail("op value " + std::to_string(v) + " is out of range");
  return static_cast<Op>(v);
}

int32_t index_in(ByteReader& r, int64_t lo, int64_t hi, const char* what) {
  const int64_t v = r.i64();
  if (v < lo || v > hi) r.fail(std::string(what) + " " + std::to_string(v) + " is out of range");
  return static_cast<int32_t>(v);
}

// --- IR -------------------------------------------------------------------

void put(ByteWriter& w, const SymExpr& e) {
  if (auto c = e.try_constant()) {
    w.u8(0);
    w.i64(*c);
    return;
  }
  w.u8(1);
  w.u32(static_cast<uint32_t>(e.terms().size()));
  for (const auto& [m, c] : e.terms()) {
    w.strings(m);
    w.i64(c);
  }
}

SymExpr get_expr(ByteReader& r) {
  const uint8_t tag = r.u8();
  if (tag == 0) return SymExpr(r.i64());
  if (tag != 1) r.fail("bad dimension tag " + std::to_string(tag));
  std::map<SymExpr::Monomial, int64_t> terms;
  const std::size_t n = r.count(4 + 8);
  for (std::size_t i = 0; i < n; ++i) {
    SymExpr::Monomial m = r.strings();
    terms[std::move(m)] = r.i64();
  }
  return SymExpr::from_terms(std::move(terms));
}

void put(ByteWriter& w, const TensorType& t) {
  w.u32(static_cast<uint32_t>(t.dtype));
  w.u32(static_cast<uint32_t>(t.shape.size()));
  for (const auto& d : t.shape) put(w, d);
}

TensorType get_type(ByteReader& r) {
  TensorType t;
  t.dtype = enum_in<DType>(r, static_cast<uint32_t>(DType::boolean) + 1, "dtype");
  const std::size_t n = r.count(kMinDim);
  t.shape.reserve(n);
  for (std::size_t i = 0; i < n; ++i) t.shape.push_back(get_expr(r));
  return t;
}

void put(ByteWriter& w, const Attrs& attrs) {
  w.u32(static_cast<uint32_t>(attrs.items().size()));
  for (const auto& [k, v] : attrs.items()) {
    w.str(k);
    w.u8(static_cast<uint8_t>(v.index()));
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, bool>)
            w.u8(x ? 1 : 0);
          else if constexpr (std::is_same_v<T, int64_t>)
            w.i64(x);
          else if constexpr (std::is_same_v<T, double>)
            w.f64(x);
          else if constexpr (std::is_same_v<T, std::string>)
            w.str(x);
          else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
            w.u32(static_cast<uint32_t>(x.size()));
            for (int64_t i : x) w.i64(i);
          } else if constexpr (std::is_same_v<T, std::vector<SymExpr>>) {
            w.u32(static_cast<uint32_t>(x.size()));
            for (const auto& e : x) put(w, e);
          } else if constexpr (std::is_same_v<T, DType>) {
            w.u32(static_cast<uint32_t>(x));
          }
        },
        v);
  }
}

Attrs get_attrs(ByteReader& r) {
  Attrs attrs;
  const std::size_t n = r.count(4 + 1 + 1);
  for (std::size_t i = 0; i < n; ++i) {
    std::string k = r.str();
    switch (r.u8()) {
      case 0: attrs.set(k, r.u8() != 0); break;
      case 1: attrs.set(k, r.i64()); break;
      case 2: attrs.set(k, r.f64()); break;
      case 3: attrs.set(k, r.str()); break;
      case 4: {
        std::vector<int64_t> v(r.count(8));
        for (auto& x : v) x = r.i64();
        attrs.set(k, std::move(v));
        break;
      }
      case 5: {
        const std::size_t m = r.count(kMinDim);
        std::vector<SymExpr> v;
        v.reserve(m);
        for (std::size_t j = 0; j < m; ++j) v.push_back(get_expr(r));
        attrs.set(k, std::move(v));
        break;
      }
      case 6: attrs.set(k, enum_in<DType>(r, static_cast<uint32_t>(DType::boolean) + 1, "dtype")); break;
      default: r.fail("attribute '" + k + "' has an unknown type");
    }
  }
  return attrs;
}

void put(ByteWriter& w, const Graph& g) {
  w.u32(static_cast<uint32_t>(g.nodes().size()));
  for (const Node& n : g.nodes()) {
    w.u32(op_number(n.op));
    w.u32(static_cast<uint32_t>(n.inputs.size()));
    for (ValueId v : n.inputs) w.i64(v);
    put(w, n.attrs);
    put(w, n.type);
    w.str(n.name);
    w.u8(static_cast<uint8_t>(n.kind));
    w.str(n.target);
  }
  w.u32(static_cast<uint32_t>(g.outputs().size()));
  for (ValueId v : g.outputs()) w.i64(v);
}

Graph get_graph(ByteReader& r) {
  const std::size_t n = r.count(kMinNode);
  std::vector<Node> nodes;
  nodes.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    Node node;
    node.op = op_in(r);
    const std::size_t k = r.count(8);
    for (std::size_t j = 0; j < k; ++j) node.inputs.push_back(index_in(r, 0, static_cast<int64_t>(i) - 1, "operand"));
    node.attrs = get_attrs(r);
    node.type = get_type(r);
    node.name = r.str();
    const uint8_t kind = r.u8();
    if (kind > static_cast<uint8_t>(PlaceholderKind::buffer)) r.fail("placeholder kind is out of range");
    node.kind = static_cast<PlaceholderKind>(kind);
    node.target = r.str();
    nodes.push_back(std::move(node));
  }
  std::vector<ValueId> outs(r.count(8));
  for (auto& o : outs) o = index_in(r, 0, static_cast<int64_t>(n) - 1, "output");
  return Graph::from_parts(std::move(nodes), std::move(outs));
}

void put(ByteWriter& w, const TraceResult& t) {
  put(w, t.graph);
  w.u32(static_cast<uint32_t>(t.signature.inputs.size()));
  for (const auto& in : t.signature.inputs) {
    w.str(in.path);
    put(w, in.type);
  }
  w.u32(static_cast<uint32_t>(t.signature.guards.size()));
  for (const auto& g : t.signature.guards) {
    w.str(g.path);
    w.str(g.value);
  }
  w.u32(static_cast<uint32_t>(t.signature.sym_inputs.size()));
  for (const auto& si : t.signature.sym_inputs) {
    w.str(si.path);
    put(w, si.expr);
  }
  w.strings(t.signature.shape_guards);
  w.u32(static_cast<uint32_t>(t.signature.dim_bounds.size()));
  for (const auto& bound : t.signature.dim_bounds) {
    put(w, bound.lhs);
    put(w, bound.rhs);
  }
  w.strings(t.output_paths);
  w.str(t.name);
  w.u32(static_cast<uint32_t>(t.regions.size()));
  for (const auto& [key, body] : t.regions) {
    w.str(key);
    put(w, body);
  }
}

TraceResult get_trace(ByteReader& r) {
  TraceResult t;
  t.graph = get_graph(r);
  const std::size_t ni = r.count(4 + 8);
  for (std::size_t i = 0; i < ni; ++i) {
    InputSpec in;
    in.path = r.str();
    in.type = get_type(r);
    t.signature.inputs.push_back(std::move(in));
  }
  const std::size_t ng = r.count(8);
  for (std::size_t i = 0; i < ng; ++i) {
    GuardSpec g;
    g.path = r.str();
    g.value = r.str();
    t.signature.guards.push_back(std::move(g));
  }
  const std::size_t ns = r.count(4 + 8);
  for (std::size_t i = 0; i < ns; ++i) {
    SymInputSpec si;
    si.path = r.str();
    si.expr = get_expr(r);
    t.signature.sym_inputs.push_back(std::move(si));
  }
  t.signature.shape_guards = r.strings();
  const std::size_t nb = r.count(8);
  for (std::size_t i = 0; i < nb; ++i) {
    DimBound bound;
    bound.lhs = get_expr(r);
    bound.rhs = get_expr(r);
    t.signature.dim_bounds.push_back(std::move(bound));
  }
  t.output_paths = r.strings();
  t.name = r.str();
  const std::size_t nr = r.count(4 + 4 + 4);
  for (std::size_t i = 0; i < nr; ++i) {
    std::string key = r.str();
    if (!t.regions.empty() && key <= t.regions.rbegin()->first) r.fail("region bodies are not in key order");
    t.regions.emplace(std::move(key), get_graph(r));
  }
  return t;
}

// Every region call names a body the trace carries, and every body is the
// one its name (its canonical hash) says: the graph key, a hash of the
// trace's graph, covers the bodies through these names.
// Gives each body's symbols in canonical order (what a call binds).
std::map<std::string, std::vector<std::string>> check_regions(const TraceResult& t) {
  std::map<std::string, std::vector<std::string>> symbols;
  for (const auto& [key, body] : t.regions) {
    verify(body);
    for (const Node& n : body.nodes())
      if (n.op == Op::region_call) throw VerifyError("region body " + key + " calls a region");
    if (body.outputs().size() != 1)
      throw VerifyError("region body " + key + " has " + std::to_string(body.outputs().size()) + " results");
    if (canonical_hash(body).hex() != key) throw VerifyError("region body " + key + " is not the body its name hashes");
    symbols.emplace(key, canonical_symbols(body));
  }
  for (const Node& n : t.graph.nodes())
    if (n.op == Op::region_call && !t.regions.count(n.attrs.get<std::string>("region")))
      throw VerifyError("node '" + n.name + "' calls region " + n.attrs.get<std::string>("region") +
                        ", whose body the trace does not carry");
  return symbols;
}

void put(ByteWriter& w, const CompilerConfig& c) {
  w.u32(static_cast<uint32_t>(c.mode));
  w.u8(c.ge_config.enable_single_stream ? 1 : 0);
  w.u8(c.fusion ? 1 : 0);
  w.u8(c.memory_planning ? 1 : 0);
  w.i64(c.max_streams);
  w.i64(c.autotune_candidates);
  w.i64(c.autotune_repetitions);
  w.i64(c.autotune_min_time_us);
  w.u32(static_cast<uint32_t>(c.input_handling));
  w.u8(!c.autotune ? 0 : *c.autotune ? 2 : 1);
  w.u8(c.eager_kernels ? 1 : 0);
}

CompilerConfig get_config(ByteReader& r) {
  CompilerConfig c;
  c.mode = enum_in<CompileMode>(r, 2, "compile mode");
  c.ge_config.enable_single_stream = r.u8() != 0;
  c.fusion = r.u8() != 0;
  c.memory_planning = r.u8() != 0;
  c.max_streams = index_in(r, 1, 64, "max_streams");
  c.autotune_candidates = index_in(r, 0, 1 << 20, "autotune_candidates");
  c.autotune_repetitions = index_in(r, 0, 1 << 20, "autotune_repetitions");
  c.autotune_min_time_us = index_in(r, 0, 1 << 30, "autotune_min_time_us");
  c.input_handling = enum_in<InputHandling>(r, 2, "input handling");
  const uint8_t tune = r.u8();
  if (tune > 2) r.fail("autotune value " + std::to_string(tune) + " is out of range");
  if (tune != 0) c.autotune = tune == 2;
  c.eager_kernels = r.u8() != 0;
  return c;
}

// --- The program ------------------------------------------------------------

void put(ByteWriter& w, const DeviceProgram& p) {
  w.u32(static_cast<uint32_t>(p.buffers.size()));
  for (const auto& b : p.buffers) {
    w.u8(static_cast<uint8_t>(b.kind));
    w.i64(b.index);
    put(w, b.type);
  }
  w.u32(static_cast<uint32_t>(p.steps.size()));
  for (const auto& s : p.steps) {
    w.u32(op_number(s.op));
    put(w, s.attrs);
    w.u32(static_cast<uint32_t>(s.operands.size()));
    for (int o : s.operands) w.i64(o);
    w.i64(s.result);
    w.i64(s.stream);
    w.u32(static_cast<uint32_t>(s.deps.size()));
    for (int d : s.deps) w.i64(d);
  }
  w.u32(static_cast<uint32_t>(p.parameters.size()));
  for (const auto& ref : p.parameters) {
    w.str(ref.name);
    w.u8(static_cast<uint8_t>(ref.kind));
  }
  w.u32(static_cast<uint32_t>(p.outputs.size()));
  for (int o : p.outputs) w.i64(o);
  w.i64(p.num_inputs);
  w.i64(p.num_output_buffers);
  w.i64(p.num_streams);
}

DeviceProgram get_program(ByteReader& r) {
  DeviceProgram p;
  constexpr int64_t kMax = int64_t{1} << 30;
  const std::size_t nb = r.count(1 + 8 + 4 + 4);
  p.buffers.reserve(nb);
  for (std::size_t i = 0; i < nb; ++i) {
    BufferDesc b;
    const uint8_t kind = r.u8();
    if (kind > static_cast<uint8_t>(BufferKind::view)) r.fail("buffer kind is out of range");
    b.kind = static_cast<BufferKind>(kind);
    b.index = index_in(r, -1, kMax, "buffer index");
    b.type = get_type(r);
    p.buffers.push_back(std::move(b));
  }
  const std::size_t ns = r.count(kMinStep);
  p.steps.reserve(ns);
  for (std::size_t i = 0; i < ns; ++i) {
    ProgramStep s;
    s.op = op_in(r);
    s.attrs = get_attrs(r);
    s.operands.resize(r.count(8));
    for (auto& o : s.operands) o = index_in(r, 0, kMax, "operand");
    s.result = index_in(r, -1, kMax, "result");
    s.stream = index_in(r, 0, kMax, "stream");
    s.deps.resize(r.count(8));
    for (auto& d : s.deps) d = index_in(r, 0, kMax, "dependency");
    p.steps.push_back(std::move(s));
  }
  const std::size_t np = r.count(4 + 1);
  for (std::size_t i = 0; i < np; ++i) {
    ParameterRef ref;
    ref.name = r.str();
    const uint8_t kind = r.u8();
    if (kind > static_cast<uint8_t>(PlaceholderKind::buffer)) r.fail("parameter kind is out of range");
    ref.kind = static_cast<PlaceholderKind>(kind);
    p.parameters.push_back(std::move(ref));
  }
  p.outputs.resize(r.count(8));
  for (auto& o : p.outputs) o = index_in(r, 0, kMax, "output");
  p.num_inputs = index_in(r, 0, kMax, "input count");
  p.num_output_buffers = index_in(r, 0, kMax, "output buffer count");
  p.num_streams = index_in(r, 1, 64, "stream count");
  return p;
}

void put(ByteWriter& w, const std::vector<AutotuneDecision>& decisions) {
  w.u32(static_cast<uint32_t>(decisions.size()));
  for (const auto& d : decisions) {
    w.str(d.key);
    w.str(d.chosen);
    w.f64(d.best_us);
    w.f64(d.default_us);
    w.i64(d.candidates);
    w.u32(static_cast<uint32_t>(d.steps.size()));
    for (int s : d.steps) w.i64(s);
    w.str(d.timed_on);
  }
}

std::vector<AutotuneDecision> get_decisions(ByteReader& r) {
  std::vector<AutotuneDecision> out;
  const std::size_t na = r.count(4 + 4 + 8 + 8 + 8 + 4 + 4);
  for (std::size_t i = 0; i < na; ++i) {
    AutotuneDecision d;
    d.key = r.str();
    d.chosen = r.str();
    d.best_us = r.f64();
    d.default_us = r.f64();
    d.candidates = index_in(r, 0, 1 << 20, "candidate count");
    d.steps.resize(r.count(8));
    for (auto& s : d.steps) s = index_in(r, 0, int64_t{1} << 30, "tuned step");
    d.timed_on = r.str();
    out.push_back(std::move(d));
  }
  return out;
}

void put_record(ByteWriter& w, const CompiledGraph& g, bool with_program) {
  w.u32(kGraphMagic);
  w.u32(kEncodingVersion);
  put(w, g.trace);
  put(w, g.config);
  w.u8(g.dynamic ? 1 : 0);
  w.u8(with_program ? 1 : 0);
  // With the program, the optimized graph is not stored (running needs only
  // the program); without it, the optimized graph is, so a loader lowers it
  // with the stored autotune decisions instead of running the graph passes
  // and autotuning again. With regions, the method's program keeps its
  // calls and each region's program is stored once, after the record.
  if (with_program)
    put(w, g.regions.empty() ? g.program : g.calling);
  else
    put(w, g.optimized);
  w.u32(static_cast<uint32_t>(g.timings.size()));
  for (const auto& t : g.timings) {
    w.str(t.name);
    w.f64(t.seconds);
    w.str(t.note);
  }
  put(w, g.autotune);
  w.u64(g.planned_arena_bytes);
  w.u64(g.unplanned_bytes);
  w.f64(g.compile_seconds);
  w.u32(static_cast<uint32_t>(g.regions.size()));
  for (const auto& [key, r] : g.regions) {
    w.str(key);
    if (with_program)
      put(w, r.program);
    else
      put(w, r.optimized);
    put(w, r.autotune);
  }
}

CompiledGraph get_record(ByteReader& r, bool* with_program_out) {
  if (r.u32() != kGraphMagic) r.fail("it is not a compiled graph");
  const uint32_t version = r.u32();
  if (version != kEncodingVersion)
    r.fail("encoding version " + std::to_string(version) + " is not this build's " + std::to_string(kEncodingVersion));
  CompiledGraph g;
  g.trace = get_trace(r);
  g.config = get_config(r);
  g.dynamic = r.u8() != 0;
  const bool with_program = r.u8() != 0;
  if (with_program)
    g.program = get_program(r);
  else
    g.optimized = get_graph(r);
  const std::size_t nt = r.count(4 + 8 + 4);
  for (std::size_t i = 0; i < nt; ++i) {
    PassTiming t;
    t.name = r.str();
    t.seconds = r.f64();
    t.note = r.str();
    g.timings.push_back(std::move(t));
  }
  g.autotune = get_decisions(r);
  g.planned_arena_bytes = r.u64();
  g.unplanned_bytes = r.u64();
  g.compile_seconds = r.f64();
  const std::size_t nr = r.count(4 + 4);
  for (std::size_t i = 0; i < nr; ++i) {
    std::string key = r.str();
    if (!g.regions.empty() && key <= g.regions.rbegin()->first) r.fail("region programs are not in key order");
    CompiledRegion region;
    if (with_program)
      region.program = get_program(r);
    else
      region.optimized = get_graph(r);
    region.autotune = get_decisions(r);
    g.regions.emplace(std::move(key), std::move(region));
  }
  if (!r.done()) r.fail("it has trailing bytes");
  if (with_program_out) *with_program_out = with_program;
  return g;
}

}  // namespace

std::string serialize_program(const DeviceProgram& p) {
  ByteWriter w;
  put(w, p);
  return w.take();
}

DeviceProgram deserialize_program(std::string_view bytes) {
  ByteReader r(bytes, "the serialized program");
  DeviceProgram p = get_program(r);
  if (!r.done()) r.fail("it has trailing bytes");
  validate_program(p);
  return p;
}

std::string serialize_compiled(const CompiledGraph& g, bool with_program) {
  ByteWriter w;
  put_record(w, g, with_program);
  return w.take();
}

CompiledGraph deserialize_compiled(std::string_view bytes, bool* with_program) {
  ByteReader r(bytes, "the compiled graph");
  bool program = false;
  CompiledGraph g = get_record(r, &program);
  verify(g.trace.graph);
  const std::map<std::string, std::vector<std::string>> symbols = check_regions(g.trace);
  bool same = g.regions.size() == g.trace.regions.size();
  for (const auto& [key, region] : g.regions) same = same && g.trace.regions.count(key);
  if (!same) throw VerifyError("the compiled regions are not the regions the trace calls");
  if (program && g.regions.empty()) {
    validate_program(g.program);
  } else if (program) {
    // Each part is checked, then the linked program as a whole.
    g.calling = std::move(g.program);
    validate_program(g.calling, /*calls=*/true);
    for (const auto& [key, region] : g.regions) validate_program(region.program);
    ProgramLinkStats linked;
    g.program = link_program(g.calling, g.regions, symbols, g.config.memory_planning, &linked);
    validate_program(g.program, false, &linked.typed);
  } else {
    verify(g.optimized);
    for (const auto& [key, region] : g.regions) verify(region.optimized);
  }
  if (with_program) *with_program = program;
  return g;
}

std::string serialize_region(const RegionArtifact& a) {
  ByteWriter w;
  w.u32(kRegionMagic);
  w.u32(kEncodingVersion);
  w.str(a.key);
  put(w, a.body);
  put(w, a.config);
  put(w, a.compiled.optimized);
  put(w, a.compiled.program);
  put(w, a.compiled.autotune);
  w.str(a.compiled.decomposed);
  return w.take();
}

RegionArtifact deserialize_region(std::string_view bytes) {
  ByteReader r(bytes, "the compiled region");
  if (r.u32() != kRegionMagic) r.fail("it is not a compiled region");
  const uint32_t version = r.u32();
  if (version != kEncodingVersion)
    r.fail("encoding version " + std::to_string(version) + " is not this build's " + std::to_string(kEncodingVersion));
  RegionArtifact a;
  a.key = r.str();
  a.body = get_graph(r);
  a.config = get_config(r);
  a.compiled.optimized = get_graph(r);
  a.compiled.program = get_program(r);
  a.compiled.autotune = get_decisions(r);
  a.compiled.decomposed = r.str();
  if (!r.done()) r.fail("it has trailing bytes");
  if (a.compiled.decomposed.size() != 32 ||
      a.compiled.decomposed.find_first_not_of("0123456789abcdef") != std::string::npos)
    r.fail("its decomposed body's hash is not 32 hex digits");
  // The body is the one its key names (check_regions' rules for a body).
  TraceResult t;
  t.regions.emplace(a.key, a.body);
  verify(a.body);
  check_regions(t);
  verify(a.compiled.optimized);
  validate_program(a.compiled.program);
  for (const auto& d : a.compiled.autotune)
    for (const int s : d.steps)
      if (s < 0 || static_cast<std::size_t>(s) >= a.compiled.program.steps.size())
        throw VerifyError("a tuning decision of region " + a.key + " names step " + std::to_string(s) +
                          " of a program of " + std::to_string(a.compiled.program.steps.size()) + " steps");
  return a;
}

}  // namespace npucache::compiler
