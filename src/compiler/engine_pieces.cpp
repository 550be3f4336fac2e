// The pieces of a method split at graph breaks: each made once per key
// (compiled or loaded), prepared, run, or replayed padded to a captured
// size (compiler/compiled_function.h, compiler/engine.h).
#include "compiler/compiled_function.h"

#include "compiler/passes.h"

#include <npucache/device.h>
#include <npucache/error.h>
#include <npucache/ops.h>

#include "compiler/auto_dynamic.h"
#include "compiler/debug_trace.h"
#include "compiler/executor.h"
#include "compiler/shape_buckets.h"
#include "compiler/surface.h"
#include "log/log.h"
#include "nn/bind_plan.h"
#include "nn/interop.h"
#include "nn/piece_shapes.h"

#include <npucache/ir/hash.h>

#include <xxhash.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

namespace npucache {
namespace detail {

namespace {

// A piece's key: its computation (graph), its input types, its SymInt
// inputs and the parameters it reads (bound_names: same-shaped layers split
// at host reads have one structure and are other programs).
// Each part is its length, ':' and itself, so that no two lists of parts
// join alike (a parameter name may hold '|').
std::string piece_key(const TraceResult& t) {
  std::string key;
  const auto add = [&key](const std::string& part) { key += std::to_string(part.size()) + ":" + part + "|"; };
  add(canonical_hash(t.graph).hex());
  for (const auto& in : t.signature.inputs) add(type_str(in.type));
  for (const auto& si : t.signature.sym_inputs) add(si.path + "=" + si.expr.str());
  add("reads");
  for (const auto& name : bound_names(t.graph)) add(name);
  return key;
}

std::string site_text(const std::vector<nn::PieceSite>& sites) {
  std::string out;
  for (const auto& s : sites) out += (out.empty() ? "" : ", ") + s.where + "[" + std::to_string(s.index) + "]";
  return out;
}

int piece_device(const nn::Piece& piece) {
  return piece.inputs.empty() ? current_device() : piece.inputs.front().device();
}

}  // namespace

CompiledFunction::PieceIt CompiledFunction::add_piece(const std::string& key, const TraceResult& trace,
                                                      const FlatArgs& args, int device, bool symbolic,
                                                      std::size_t& compiled, std::size_t& loaded) {
  // A recording is checked once, when its piece is made: a later one equal
  // to it (by key or graph) is the same graph.
  verify(trace.graph);
  PieceEntry e;
  const compiler::CompileStep compile_step = [&](TraceResult tr, const SymBindings& example,
                                                 const compiler::CompileHints* hints) {
    return compile(std::move(tr), example, device, hints, symbolic);
  };
  std::shared_ptr<compiler::EntrySource> src;
  if (source_) {
    XXH128_hash_t h = XXH3_128bits(key.data(), key.size());
    src = source_->piece_source(options_.method_name + ".piece-" + Hash128{h.high64, h.low64}.hex().substr(0, 16));
  }
  if (src) {
    TraceResult named = trace;
    named.name = *label_ + " piece";
    compiler::FirstEntry first = src->first_call(
        args, [&] { return named; }, compile_step);
    e.graph = std::move(first.graph);
    e.templates = std::move(first.templates);
    e.loaded = first.status.outcome == Outcome::hit;
  } else {
    e.graph = compile(trace, trace.signature.bind(args), device, nullptr, symbolic);
  }
  e.program = std::shared_ptr<const compiler::DeviceProgram>(e.graph, &e.graph->program);
  e.params = resolve_params(*e.program);
  ++(e.loaded ? loaded : compiled);
  return pieces_.emplace(key, std::move(e)).first;
}

CompiledFunction::PieceIt CompiledFunction::general_piece(const nn::Piece& piece, FlatArgs& args, int device,
                                                          SymBindings& b, std::size_t& compiled, std::size_t& loaded) {
  if (surface_.dynamic == compiler::DynamicPolicy::none) return pieces_.end();
  if (!piece_profile_loaded_) {
    // The places' sites earlier processes made dynamic (the method's
    // profile); a profile that cannot be read is warned about by the source.
    piece_profile_loaded_ = true;
    std::vector<DimMark> stored;
    if (source_ && surface_.dynamic == compiler::DynamicPolicy::automatic) source_->load_profile(args, stored);
    for (const auto& m : stored) {
      if (!m.input.starts_with(kPieceMark)) continue;
      const std::string rest = m.input.substr(kPieceMark.size());
      const auto colon = rest.find(':');
      if (colon == std::string::npos || colon == 0 || colon > 6 || rest.find_first_not_of("0123456789") != colon)
        continue;
      PiecePlace& p = places_[std::stoul(rest.substr(0, colon))];
      const nn::PieceSite site{rest.substr(colon + 1), m.dim};
      if (std::find(p.sites.begin(), p.sites.end(), site) == p.sites.end())
        p.sites.insert(std::upper_bound(p.sites.begin(), p.sites.end(), site), site);
    }
  }
  PiecePlace& place = places_[piece.index];
  for (const auto& k : place.general_keys) {
    auto it = pieces_.find(k);
    if (auto m = nn::match(*it->second.general, piece.trace.graph, &args.symints)) {
      b = std::move(*m);
      return it;
    }
  }
  // No piece serves the recording: the sites that changed since the last
  // such recording of this place turn dynamic (dynamic=true: all of them).
  std::vector<nn::PieceSite> changed;
  if (surface_.dynamic == compiler::DynamicPolicy::all)
    changed = nn::all_sites(piece.trace.graph);
  else if (place.last)
    changed = nn::changed_sites(*place.last, piece.trace.graph).value_or(std::vector<nn::PieceSite>{});
  place.last = piece.trace.graph;
  std::vector<nn::PieceSite> added;
  for (const auto& site : changed)
    if (!std::binary_search(place.sites.begin(), place.sites.end(), site)) {
      place.sites.insert(std::upper_bound(place.sites.begin(), place.sites.end(), site), site);
      added.push_back(site);
    }
  if (!added.empty() && surface_.dynamic == compiler::DynamicPolicy::automatic) {
    log::info("{}: piece {} changed {}; compiling it again with them dynamic (automatic dynamic)", *label_, piece.index,
              site_text(added));
    if (source_) {
      std::vector<DimMark> marks;
      for (const auto& site : added)
        marks.push_back({std::string(kPieceMark) + std::to_string(piece.index) + ":" + site.where, site.index});
      source_->save_profile(marks);
    }
  }
  if (place.sites.empty()) return pieces_.end();
  std::optional<TraceResult> general = nn::generalize(piece.trace, place.sites);
  if (!general) return pieces_.end();
  std::optional<SymBindings> m = nn::match(*general, piece.trace.graph, &args.symints);
  if (!m) return pieces_.end();  // not expected: the recording is the general graph at its own sizes
  const std::string key = piece_key(*general);
  auto it = pieces_.find(key);
  if (it == pieces_.end()) {
    it = add_piece(key, *general, args, device, true, compiled, loaded);
    it->second.general = std::make_shared<const TraceResult>(std::move(*general));
  }
  if (!it->second.general) return pieces_.end();
  if (std::find(place.general_keys.begin(), place.general_keys.end(), key) == place.general_keys.end())
    place.general_keys.insert(place.general_keys.begin(), key);
  b = std::move(*m);
  return it;
}

std::pair<CompiledFunction::PieceEntry*, compiler::ProgramRunner*> CompiledFunction::piece_entry(nn::Piece& piece,
                                                                                                 PieceCounts& counts,
                                                                                                 SymBindings& b) {
  const int device = piece_device(piece);
  FlatArgs args;
  for (std::size_t i = 0; i < piece.inputs.size(); ++i)
    args.tensors.emplace_back(piece.trace.signature.inputs[i].path, piece.inputs[i]);
  PiecePlace& place = places_[piece.index];
  auto it = pieces_.end();
  if (place.served_graph && *place.served_graph == piece.trace.graph) it = place.served;
  if (it == pieces_.end()) {
    const std::string key = piece_key(piece.trace);
    it = pieces_.find(key);
    if (it == pieces_.end()) {
      if (!place.static_only) {
        // The general form is beyond what symbolic shapes hold (an
        // expression past their bounds, a size a decomposition or pass
        // needs as a constant): the place runs static pieces from now on,
        // this call included. A static piece that fails too fails the call
        // with its own error, as eager code would.
        auto stay_static = [&](const Error& e) {
          place.static_only = true;
          b.clear();
          args.symints.clear();
          it = pieces_.end();
          log::info("{}: piece {} stays static: its general form cannot be compiled ({})", *label_, piece.index,
                    e.what());
        };
        try {
          it = general_piece(piece, args, device, b, counts.compiled, counts.loaded);
        } catch (const ShapeError& e) {
          stay_static(e);
        } catch (const VerifyError& e) {
          stay_static(e);
        } catch (const ConfigError& e) {
          stay_static(e);
        }
      }
      if (it == pieces_.end()) it = add_piece(key, piece.trace, args, device, false, counts.compiled, counts.loaded);
    }
    if (!it->second.general) {
      place.served_graph = piece.trace.graph;
      place.served = it;
    }
  }
  ++counts.pieces;
  (it->second.loaded ? counts.any_loaded : counts.any_compiled) = true;
  auto& r = it->second.runners[device];
  if (!r) {
    r = std::make_unique<compiler::ProgramRunner>(it->second.program, device);
    r->set_templates(it->second.templates);
  }
  return {&it->second, r.get()};
}

std::vector<Tensor> CompiledFunction::prepare_piece(nn::Piece& piece, PieceCounts& counts) {
  compiler::ProgramRunner* runner = nullptr;
  bool keep_template = false;
  SymBindings b;
  {
    std::lock_guard lock(mu_);
    auto [e, r] = piece_entry(piece, counts, b);
    runner = r;
    keep_template = config_.captures() && e->templates != nullptr;
  }
  // A capture records addresses, never values: it needs no real tensor.
  if (keep_template && budget_->take()) runner->capture_template(b, current_communicator());
  std::vector<Tensor> outs;
  const Graph& g = piece.trace.graph;
  for (const ValueId v : g.outputs()) {
    const TensorType& t = g.node(v).type;
    outs.push_back(Tensor::meta(concrete_dims(t.shape), t.dtype));
  }
  return outs;
}

std::vector<Tensor> CompiledFunction::run_piece(nn::Piece& piece, PieceCounts& counts) {
  compiler::ProgramRunner* runner = nullptr;
  const std::vector<Tensor>* params = nullptr;
  SymBindings b;
  {
    std::lock_guard lock(mu_);
    auto [e, r] = piece_entry(piece, counts, b);
    runner = r;
    params = &e->params;
  }
  if (config_.captures()) {
    // Every piece replays into the thread's scratch pool with outputs of
    // their own: code after it (later pieces included) reads its outputs,
    // and tensors of the thread's pool that its replay must not overwrite
    // -- arguments fed back from an earlier call, which the method's eager
    // code may read or return after any piece, the last one included
    // (a replay stages only the inputs it reads). So a split method never
    // writes the thread's pool, and its results are its own memory.
    compiler::ReplayOptions ro = replay_options();
    ro.scratch_pool = true;
    return runner->replay(piece.inputs, *params, b, current_communicator(), ro);
  }
  return runner->run(piece.inputs, *params, b, current_communicator());
}

std::optional<std::vector<Tensor>> CompiledFunction::replay_padded(
    const compiler::DeviceProgram& p, const std::set<std::string>& paddable, compiler::ProgramRunner& runner,
    const std::vector<Tensor>& inputs, const std::vector<Tensor>& params, const SymBindings& b,
    const compiler::ReplayOptions& ro) {
  {
    std::lock_guard lock(mu_);
    if (!padding_ok_) return std::nullopt;
  }
  const auto bucket = compiler::nearest_bucket(b, runner.captured_bindings(), paddable);
  if (!bucket) return std::nullopt;
  Communicator& comm = current_communicator();
  const auto padded = compiler::pad_inputs(p, inputs, b, *bucket);
  std::vector<Tensor> outs = compiler::slice_outputs(p, runner.replay(padded, params, *bucket, comm, ro), b, *bucket);
  std::string key;
  for (const auto& [sym, v] : b) key += sym + "=" + std::to_string(v) + "->" + std::to_string(bucket->at(sym)) + ";";
  bool check = false;
  {
    // Marked checked only once a check passed: a thread that comes while
    // another one checks this pair checks it too rather than trusting it.
    std::lock_guard lock(mu_);
    check = !padding_checked_.count(key);
  }
  if (check) {  // the first time this size uses this bucket: compare with an unpadded run
    const std::vector<Tensor> ref = runner.run(inputs, params, b, comm);
    bool same = ref.size() == outs.size();
    for (std::size_t i = 0; same && i < ref.size(); ++i) {
      const auto x = ref[i].to_vector(), y = outs[i].to_vector();
      same = x.size() == y.size();
      for (std::size_t k = 0; same && k < x.size(); ++k)
        same = std::fabs(x[k] - y[k]) <= 1e-5f + 1e-5f * std::fabs(x[k]);
    }
    if (!same) {
      std::lock_guard lock(mu_);
      padding_ok_ = false;
      log::warn(
          "enable_shape_handling: padding {} up to a captured size changes its results (its dynamic dim is "
          "not computed row by row); the method is no longer padded",
          *label_);
      return ref;
    }
  }
  std::lock_guard lock(mu_);
  if (check) padding_checked_.insert(key);
  CallStatus& status = statuses_[std::this_thread::get_id()];
  status.replayed = true;
  status.captures = budget_->made();
  status.reason = "padded to a captured size (enable_shape_handling)";
  return outs;
}

}  // namespace detail
}  // namespace npucache
