// Region programs (compiler/link_program.h): each compile region is
// lowered, scheduled and tuned once and stamped out at every call; a
// stored object holds the method's program with its calls and each
// region's program once, and a loader links them into the program the
// compile ran. A link that does not fit, or a record whose regions are
// not its trace's, is refused naming what is wrong; bodies returning an
// argument, a view or a parameter link and run as eager does.
#include <npucache/compile.h>
#include <npucache/error.h>
#include <npucache/module.h>
#include <npucache/ops.h>
#include <npucache/region.h>
#include <npucache/trace.h>

#include <gtest/gtest.h>

#include "compiler/compiled_graph.h"
#include "compiler/link_program.h"
#include "compiler/region_stack.h"
#include "compiler/serialize.h"
#include "compiler/validate.h"
#include "support/expect_close.h"
#include "support/expect_error.h"

using namespace npucache;
using namespace npucache::region_stack;
using npucache::testing::expect_error;
using testing_support::expect_close;

namespace region_programs {

struct Compiled {
  TraceResult trace;
  compiler::CompiledGraph graph;
};

Compiled compile_stack(Stack& m, const Inputs& in, bool dynamic, const std::string& mode = "max-autotune") {
  TraceOptions o;
  o.dynamic = dynamic;
  TraceResult tr = trace_method(m, &Stack::forward, o, in.x, in.positions, in.caches);
  const SymBindings example = tr.signature.bind(flatten_args(o, in.x, in.positions, in.caches));
  CompilerConfig config;
  config.mode = mode == "reduce-overhead" ? CompileMode::reduce_overhead : CompileMode::max_autotune;
  config.autotune_candidates = 2;
  return {tr, compiler::compile_graph(tr, config, {}, example, dynamic, 0)};
}

std::map<std::string, std::vector<std::string>> symbols_of(const TraceResult& tr) {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& [key, body] : tr.regions) out.emplace(key, canonical_symbols(body));
  return out;
}

compiler::ProgramStep& first_call(compiler::DeviceProgram& p) {
  for (auto& s : p.steps)
    if (s.op == Op::region_call) return s;
  throw std::runtime_error("no call step");
}

}  // namespace region_programs

TEST(RegionPrograms, ALoadedObjectRunsTheProgramItsCompileRan) {
  for (const bool dynamic : {false, true})
    for (const std::string mode : {"max-autotune", "reduce-overhead"}) {
      SCOPED_TRACE(mode + (dynamic ? " dynamic" : " static"));
      Stack m(4, 2, 8);
      const Inputs in = inputs(m, 2, 3, 8);
      const region_programs::Compiled c = region_programs::compile_stack(m, in, dynamic, mode);
      ASSERT_EQ(c.graph.regions.size(), 2u);
      const std::string stored = compiler::serialize_compiled(c.graph, true);
      const compiler::CompiledGraph loaded = compiler::deserialize_compiled(stored);
      EXPECT_EQ(compiler::serialize_program(loaded.program), compiler::serialize_program(c.graph.program));
      EXPECT_EQ(compiler::serialize_program(loaded.calling), compiler::serialize_program(c.graph.calling));
      // Stored without programs (archived): lowered again from the stored
      // graphs with the stored decisions, the same program.
      const compiler::CompiledGraph archived =
          compiler::deserialize_compiled(compiler::serialize_compiled(c.graph, false));
      compiler::CompileHints hints;
      hints.optimized = &archived.optimized;
      hints.autotune = &archived.autotune;
      hints.regions = &archived.regions;
      CompilerConfig config = c.graph.config;
      const compiler::CompiledGraph again = compiler::compile_graph(
          c.trace, config, {}, c.trace.signature.bind(flatten_args(TraceOptions{}, in.x, in.positions, in.caches)),
          dynamic, 0, &hints);
      EXPECT_EQ(compiler::serialize_program(again.program), compiler::serialize_program(c.graph.program));
    }
}

// The object of a deeper model grows by the calls, not by the regions'
// steps: each region's program is stored once.
TEST(RegionPrograms, AStoredObjectHoldsEachRegionOnce) {
  Stack shallow(2, 0, 8), deep(8, 0, 8);
  const region_programs::Compiled a = region_programs::compile_stack(shallow, inputs(shallow, 2, 3, 8), false);
  const region_programs::Compiled b = region_programs::compile_stack(deep, inputs(deep, 2, 3, 8), false);
  const compiler::CompiledGraph loaded = compiler::deserialize_compiled(compiler::serialize_compiled(b.graph, true));
  ASSERT_EQ(loaded.regions.size(), 1u);
  const compiler::DeviceProgram& region = loaded.regions.begin()->second.program;
  std::size_t stored_steps = loaded.calling.steps.size() + region.steps.size();
  EXPECT_LT(stored_steps, loaded.program.steps.size()) << "the stored programs are the linked one";
  EXPECT_EQ(loaded.program.steps.size(), loaded.calling.steps.size() - 8 + 8 * region.steps.size());
  // Six more layers add less than six regions' programs.
  const std::size_t grown =
      compiler::serialize_compiled(b.graph, true).size() - compiler::serialize_compiled(a.graph, true).size();
  EXPECT_LT(grown, 6 * compiler::serialize_program(region).size())
      << "6 more layers grew the object by " << grown << " bytes";
}

TEST(RegionPrograms, AProgramLinkThatDoesNotFitIsRefused) {
  Stack m(2, 1, 8);
  const Inputs in = inputs(m, 2, 3, 8);
  const region_programs::Compiled c = region_programs::compile_stack(m, in, true);
  const auto symbols = region_programs::symbols_of(c.trace);
  const compiler::CompiledGraph& g = c.graph;
  EXPECT_NO_THROW((void)compiler::link_program(g.calling, g.regions, symbols, true));
  // A call step is no kernel: refused where a runnable program is checked.
  expect_error<Error>([&] { compiler::validate_program(g.calling); }, "is no kernel");
  EXPECT_NO_THROW(compiler::validate_program(g.calling, true));
  expect_error<VerifyError>([&] { (void)compiler::link_program(g.calling, {}, symbols, true); },
                            "the region's program is missing");
  // The two regions' programs under each other's names.
  auto swapped = g.regions;
  std::swap(swapped.begin()->second, std::next(swapped.begin())->second);
  expect_error<VerifyError>([&] { (void)compiler::link_program(g.calling, swapped, symbols, true); }, "operand 0 is");
  // A call binding one symbol too few.
  compiler::DeviceProgram short_bind = g.calling;
  auto& call = region_programs::first_call(short_bind);
  auto bind = call.attrs.get<std::vector<SymExpr>>("bind");
  ASSERT_FALSE(bind.empty());
  bind.pop_back();
  call.attrs.set("bind", bind);
  expect_error<VerifyError>([&] { (void)compiler::link_program(short_bind, g.regions, symbols, true); },
                            "symbols, its body has");
  // A call passing one parameter too few.
  compiler::DeviceProgram fewer = g.calling;
  region_programs::first_call(fewer).operands.pop_back();
  expect_error<VerifyError>([&] { (void)compiler::link_program(fewer, g.regions, symbols, true); },
                            "its region's program takes");
  // A call whose result has another type than its region's.
  compiler::DeviceProgram retyped = g.calling;
  retyped.buffers[static_cast<std::size_t>(region_programs::first_call(retyped).result)].type.dtype = DType::f16;
  expect_error<VerifyError>([&] { (void)compiler::link_program(retyped, g.regions, symbols, true); },
                            "its result is f16");
}

// A record's compiled regions must be exactly its trace's bodies: a region
// program dropped or renamed is refused, never linked or served.
TEST(RegionPrograms, ARecordWhoseRegionsAreNotItsTracesIsRefused) {
  Stack m(2, 1, 8);
  const region_programs::Compiled c = region_programs::compile_stack(m, inputs(m, 2, 3, 8), false);
  compiler::CompiledGraph dropped = c.graph;
  dropped.regions.erase(dropped.regions.begin());
  expect_error<VerifyError>([&] { (void)compiler::deserialize_compiled(compiler::serialize_compiled(dropped, true)); },
                            "the compiled regions are not the regions the trace calls");
  compiler::CompiledGraph renamed = c.graph;
  auto node = renamed.regions.extract(renamed.regions.begin());
  node.key() = std::string(32, '0');
  renamed.regions.insert(std::move(node));
  expect_error<VerifyError>([&] { (void)compiler::deserialize_compiled(compiler::serialize_compiled(renamed, true)); },
                            "the compiled regions are not the regions the trace calls");
  // A region program with a call step of its own.
  compiler::CompiledGraph nested = c.graph;
  nested.regions.begin()->second.program.steps.push_back(region_programs::first_call(nested.calling));
  expect_error<Error>([&] { (void)compiler::deserialize_compiled(compiler::serialize_compiled(nested, true)); },
                      "is no kernel");
}

namespace region_programs {

// Bodies whose result is not a buffer of their own: an argument, a view
// of one, a parameter, a view of a value they compute; and one that
// computes nothing.
struct Odd : nn::Module {
  Tensor w;
  int kind;
  Odd(int k, float seed) : kind(k) {
    w = register_parameter("w", Tensor::from_vector(testing_support::ramp(16, 0.1f * seed, -0.3f), {4, 4}));
  }
  std::string type_name() const override { return "Odd" + std::to_string(kind); }
  Tensor forward(const Tensor& x) const {
    switch (kind) {
      case 0: return x;
      case 1: return ops::reshape(x, {4, 4});
      case 2: return w;
      default: return ops::reshape(ops::matmul(x, w), {16, 1});
    }
  }
};

struct OddStack : nn::Module {
  std::vector<std::shared_ptr<Odd>> odd;
  OddStack() {
    for (int k = 0; k < 4; ++k)
      for (int copy = 0; copy < 2; ++copy) {
        odd.push_back(std::make_shared<Odd>(k, 1.0f + static_cast<float>(copy)));
        register_module(std::to_string(odd.size() - 1), odd.back());
      }
  }
  std::string type_name() const override { return "OddStack"; }
  std::vector<Tensor> forward(const Tensor& x) {
    std::vector<Tensor> out;
    for (const auto& o : odd) {
      Tensor r = nn::compile_region(*o, &Odd::forward, x);
      out.push_back(ops::relu(ops::reshape(r, {4, 4})) + ops::reshape(r, {4, 4}));
      out.push_back(r);  // the region's result itself an output of the method
    }
    return out;
  }
};

}  // namespace region_programs

TEST(RegionPrograms, BodiesReturningAnArgumentAViewOrAParameterLinkAndRunAsEager) {
  for (const char* mode : {"default", "max-autotune", "reduce-overhead"}) {
    SCOPED_TRACE(mode);
    region_programs::OddStack m;
    const Tensor x = Tensor::from_vector(testing_support::ramp(16, 0.05f, -0.4f), {4, 4});
    CompileOptions co;
    co.mode = mode;
    co.fullgraph = true;
    auto f = compile(m, &region_programs::OddStack::forward, co);
    for (int step = 0; step < 2; ++step) {
      const std::vector<Tensor> want = m.forward(x);
      const std::vector<Tensor> got = f(x);
      ASSERT_EQ(got.size(), want.size());
      for (std::size_t i = 0; i < want.size(); ++i)
        expect_close(got[i].to_vector(), want[i].to_vector(), "output " + std::to_string(i), 1e-5f);
    }
  }
}

// A loader validates a linked program's structure whole, and the types of
// only the steps no validation of its parts checked: a step of a call that
// binds sizes other than its body's own. A typed step keeps every other
// check, and a mark list that is not one per step is refused.
TEST(RegionPrograms, ALinkedProgramsTypesAreCheckedWhereNoPartCheckedThem) {
  for (const bool dynamic : {false, true}) {
    SCOPED_TRACE(dynamic ? "dynamic" : "static");
    Stack m(4, 2, 8);
    const region_programs::Compiled c = region_programs::compile_stack(m, inputs(m, 2, 3, 8), dynamic);
    const compiler::CompiledGraph& g = c.graph;
    compiler::ProgramLinkStats st;
    const compiler::DeviceProgram p =
        compiler::link_program(g.calling, g.regions, region_programs::symbols_of(c.trace), true, &st);
    ASSERT_EQ(st.typed.size(), p.steps.size());
    std::size_t untyped = 0;
    for (char t : st.typed) untyped += t == 0;
    // Static calls bind their bodies' own sizes, dynamic ones each layer's
    // own cache length symbol: a renaming.
    EXPECT_EQ(untyped, 0u);
    EXPECT_NO_THROW(compiler::validate_program(p, false, &st.typed));
    // A program without calls links to itself, every step typed.
    compiler::ProgramLinkStats none;
    const compiler::DeviceProgram same = compiler::link_program(p, g.regions, {}, true, &none);
    EXPECT_EQ(none.typed, std::vector<char>(p.steps.size(), 1));
    EXPECT_NO_THROW(compiler::validate_program(same, false, &none.typed));
    if (dynamic) {
      // The last call's layer with a cache of a constant length, or of the
      // length another of its sizes has: that call binds a constant, or
      // two of its body's symbols to one, and only its steps are typed again.
      const compiler::ProgramStep* last_call = nullptr;
      for (const auto& s : g.calling.steps)
        if (s.op == Op::region_call) last_call = &s;
      ASSERT_NE(last_call, nullptr);
      const std::vector<std::string> body =
          region_programs::symbols_of(c.trace).at(last_call->attrs.get<std::string>("region"));
      const auto& bind = last_call->attrs.get<std::vector<SymExpr>>("bind");
      std::string own;  // the last layer's own cache length
      for (std::size_t k = 0; k < bind.size(); ++k)
        if (const std::string* name = bind[k].symbol_name(); name && *name != body.at(k)) own = *name;
      ASSERT_FALSE(own.empty());
      std::vector<SymExpr> replacements = {SymExpr(3)};
      for (const auto& b : bind)
        if (b.symbol_name() && *b.symbol_name() != own) replacements.push_back(b);
      ASSERT_GE(replacements.size(), 2u);
      replacements.resize(2);
      for (const SymExpr& replacement : replacements) {
        SCOPED_TRACE(own + " -> " + replacement.str());
        const std::map<std::string, SymExpr> fixed = {{own, replacement}};
        compiler::DeviceProgram calling = g.calling;
        for (auto& b : calling.buffers)
          for (auto& d : b.type.shape) d = d.substitute(fixed);
        for (auto& s : calling.steps) {
          const Attrs attrs = s.attrs;
          for (const auto& [k, v] : attrs.items())
            if (const auto* dims = std::get_if<std::vector<SymExpr>>(&v)) {
              std::vector<SymExpr> e;
              for (const auto& d : *dims) e.push_back(d.substitute(fixed));
              s.attrs.set(k, e);
            }
        }
        compiler::ProgramLinkStats fixed_st;
        const compiler::DeviceProgram q =
            compiler::link_program(calling, g.regions, region_programs::symbols_of(c.trace), true, &fixed_st);
        std::size_t checked = 0;
        for (char t : fixed_st.typed) checked += t == 0;
        EXPECT_GT(checked, 0u);
        EXPECT_LT(checked, q.steps.size() / 2);
        EXPECT_NO_THROW(compiler::validate_program(q, false, &fixed_st.typed));
      }
    }
    // A typed step keeps its structural checks.
    compiler::DeviceProgram broken = p;
    broken.steps.front().deps.push_back(static_cast<int>(p.steps.size()) - 1);
    expect_error<Error>([&] { compiler::validate_program(broken, false, &st.typed); }, "depends on step");
    broken = p;
    broken.steps.back().operands.front() = static_cast<int>(p.buffers.size()) + 3;
    expect_error<Error>([&] { compiler::validate_program(broken, false, &st.typed); }, "reads buffer");
    // An untyped step's type is checked.
    broken = p;
    const auto last = broken.steps.size() - 1;
    broken.buffers[static_cast<std::size_t>(broken.steps[last].result)].type.dtype = DType::i64;
    std::vector<char> marks = st.typed;
    marks[last] = 0;
    expect_error<Error>([&] { compiler::validate_program(broken, false, &marks); }, "writes");
    marks.pop_back();
    expect_error<Error>([&] { compiler::validate_program(p, false, &marks); }, "typed marks for");
  }
}
