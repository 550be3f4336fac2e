// Boost.Serialization of the IR and compiled types. Every class is
// versioned (BOOST_CLASS_VERSION); bump a version and branch on it in
// serialize() when a type gains fields.
#include "compiler/serialize.h"

#include <npucache/error.h>

#include <boost/archive/binary_iarchive.hpp>
#include <boost/archive/binary_oarchive.hpp>
#include <boost/serialization/map.hpp>
#include <boost/serialization/optional.hpp>
#include <boost/serialization/split_free.hpp>
#include <boost/serialization/tracking.hpp>
#include <boost/serialization/string.hpp>
#include <boost/serialization/utility.hpp>
#include <boost/serialization/vector.hpp>
#include <boost/iostreams/device/array.hpp>
#include <boost/iostreams/stream.hpp>

#include <sstream>

namespace boost::serialization {

using namespace npucache;
using namespace npucache::compiler;

// Constants (nearly every dim) as a tag and a value; symbolic expressions
// as their canonical terms.
template <class A>
void save(A& ar, const SymExpr& e, unsigned) {
  if (auto c = e.try_constant()) {
    const uint8_t tag = 0;
    const int64_t v = *c;
    ar << tag << v;
    return;
  }
  const uint8_t tag = 1;
  std::map<SymExpr::Monomial, int64_t> terms = e.terms();
  ar << tag << terms;
}
template <class A>
void load(A& ar, SymExpr& e, unsigned) {
  uint8_t tag = 0;
  ar >> tag;
  if (tag == 0) {
    int64_t v = 0;
    ar >> v;
    e = SymExpr(v);
    return;
  }
  if (tag != 1) throw npucache::Error("corrupt archive: bad dimension tag " + std::to_string(tag));
  std::map<SymExpr::Monomial, int64_t> terms;
  ar >> terms;
  e = SymExpr::from_terms(std::move(terms));
}

template <class A>
void save(A& ar, const Attrs& attrs, unsigned) {
  std::size_t n = attrs.items().size();
  ar << n;
  for (const auto& [k, v] : attrs.items()) {
    int idx = static_cast<int>(v.index());
    ar << k << idx;
    std::visit(
        [&](const auto& x) {
          if constexpr (std::is_same_v<std::decay_t<decltype(x)>, DType>) {
            auto t = static_cast<uint8_t>(x);
            ar << t;
          } else {
            ar << x;
          }
        },
        v);
  }
}
template <class A>
void load(A& ar, Attrs& attrs, unsigned) {
  std::size_t n = 0;
  ar >> n;
  attrs = Attrs();
  for (std::size_t i = 0; i < n; ++i) {
    std::string k;
    int idx = 0;
    ar >> k >> idx;
    switch (idx) {
      case 0: { bool x; ar >> x; attrs.set(k, x); break; }
      case 1: { int64_t x; ar >> x; attrs.set(k, x); break; }
      case 2: { double x; ar >> x; attrs.set(k, x); break; }
      case 3: { std::string x; ar >> x; attrs.set(k, x); break; }
      case 4: { std::vector<int64_t> x; ar >> x; attrs.set(k, x); break; }
      case 5: { std::vector<SymExpr> x; ar >> x; attrs.set(k, x); break; }
      case 6: { uint8_t t; ar >> t; attrs.set(k, static_cast<DType>(t)); break; }
      default: throw npucache::Error("corrupt archive: attribute '" + k + "' has unknown type " + std::to_string(idx));
    }
  }
}

template <class A>
void serialize(A& ar, TensorType& t, unsigned) {
  ar & t.dtype & t.shape;
}

template <class A>
void serialize(A& ar, Node& n, unsigned) {
  ar & n.op & n.inputs & n.attrs & n.type & n.name & n.kind & n.target;
}

template <class A>
void save(A& ar, const Graph& g, unsigned) {
  std::vector<Node> nodes = g.nodes();
  std::vector<ValueId> outs = g.outputs();
  ar << nodes << outs;
}
template <class A>
void load(A& ar, Graph& g, unsigned) {
  std::vector<Node> nodes;
  std::vector<ValueId> outs;
  ar >> nodes >> outs;
  g = Graph::from_parts(std::move(nodes), std::move(outs));
}

template <class A>
void serialize(A& ar, InputSpec& s, unsigned) { ar & s.path & s.type; }
template <class A>
void serialize(A& ar, GuardSpec& s, unsigned) { ar & s.path & s.value; }
template <class A>
void serialize(A& ar, InputSignature& s, unsigned) { ar & s.inputs & s.guards & s.shape_guards; }
template <class A>
void serialize(A& ar, TraceResult& t, unsigned) { ar & t.graph & t.signature & t.output_paths & t.name; }

template <class A>
void serialize(A& ar, CompilerConfig& c, unsigned) {
  ar & c.mode & c.ge_config.enable_single_stream & c.fusion & c.memory_planning & c.max_streams &
      c.autotune_candidates & c.autotune_repetitions & c.autotune_min_time_us & c.input_handling;
}

template <class A>
void serialize(A& ar, BufferDesc& b, unsigned) { ar & b.kind & b.index & b.type; }
template <class A>
void serialize(A& ar, ProgramStep& s, unsigned) { ar & s.op & s.attrs & s.operands & s.result & s.stream & s.deps; }
template <class A>
void serialize(A& ar, ParameterRef& r, unsigned) { ar & r.name & r.kind; }
template <class A>
void serialize(A& ar, DeviceProgram& p, unsigned) {
  ar & p.buffers & p.steps & p.parameters & p.outputs & p.num_inputs & p.num_output_buffers & p.num_streams;
}
template <class A>
void serialize(A& ar, PassTiming& t, unsigned) { ar & t.name & t.seconds & t.note; }
template <class A>
void serialize(A& ar, AutotuneDecision& d, unsigned version) {
  ar & d.key & d.chosen & d.best_us & d.default_us & d.candidates & d.steps;
  if (version >= 1) ar & d.timed_on;
}

}  // namespace boost::serialization

BOOST_SERIALIZATION_SPLIT_FREE(npucache::SymExpr)
// Dims are the most frequent objects: no class information or tracking.
BOOST_CLASS_IMPLEMENTATION(npucache::SymExpr, boost::serialization::object_serializable)
BOOST_CLASS_TRACKING(npucache::SymExpr, boost::serialization::track_never)
BOOST_SERIALIZATION_SPLIT_FREE(npucache::Attrs)
BOOST_SERIALIZATION_SPLIT_FREE(npucache::Graph)
BOOST_CLASS_VERSION(npucache::TensorType, 1)
BOOST_CLASS_VERSION(npucache::Node, 1)
BOOST_CLASS_VERSION(npucache::Graph, 1)
BOOST_CLASS_VERSION(npucache::TraceResult, 1)
BOOST_CLASS_VERSION(npucache::CompilerConfig, 1)
BOOST_CLASS_VERSION(npucache::compiler::DeviceProgram, 1)
BOOST_CLASS_VERSION(npucache::compiler::ProgramStep, 1)
// 1: timed_on (the autotune scratch bound).
BOOST_CLASS_VERSION(npucache::compiler::AutotuneDecision, 1)

namespace npucache::compiler::detail {
// The archived form of a CompiledGraph.
struct CompiledRecord {
  CompiledGraph g;
  bool has_program = false;
  template <class A>
  void serialize(A& ar, unsigned) {
    // With the program, the optimized graph is not archived (running needs
    // only the program); without it, the optimized graph is, so a loader
    // lowers it with the stored autotune decisions instead of running the
    // graph passes and autotuning again.
    ar & g.trace & g.config & g.dynamic & has_program;
    if (has_program)
      ar & g.program;
    else
      ar & g.optimized;
    ar & g.timings & g.autotune & g.planned_arena_bytes & g.unplanned_bytes & g.compile_seconds;
  }
};

}  // namespace npucache::compiler::detail
// 2: the optimized graph is archived when the program is not.
BOOST_CLASS_VERSION(npucache::compiler::detail::CompiledRecord, 2)

namespace npucache::compiler {
using detail::CompiledRecord;
namespace {

constexpr unsigned kArchiveFlags = boost::archive::no_header;  // the cache frames the bytes itself

template <class T>
std::string to_bytes(const T& v) {
  std::ostringstream os(std::ios::binary);
  {
    boost::archive::binary_oarchive ar(os, kArchiveFlags);
    ar << v;
  }
  return std::move(os).str();
}

template <class T>
T from_bytes(std::string_view bytes) {
  boost::iostreams::stream<boost::iostreams::array_source> is(bytes.data(), bytes.size());
  T v;
  try {
    boost::archive::binary_iarchive ar(is, kArchiveFlags);
    ar >> v;
  } catch (const npucache::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(std::string("cannot deserialize compiled data: ") + e.what());
  }
  return v;
}

}  // namespace

std::string serialize_program(const DeviceProgram& p) { return to_bytes(p); }
DeviceProgram deserialize_program(std::string_view bytes) { return from_bytes<DeviceProgram>(bytes); }

std::string serialize_compiled(const CompiledGraph& g, bool with_program) {
  CompiledRecord r{g, with_program};
  if (!with_program) r.g.program = DeviceProgram{};
  return to_bytes(r);
}

CompiledGraph deserialize_compiled(std::string_view bytes, bool* has_program) {
  CompiledRecord r = from_bytes<CompiledRecord>(bytes);
  if (has_program) *has_program = r.has_program;
  verify(r.g.trace.graph);
  return std::move(r.g);
}

}  // namespace npucache::compiler
