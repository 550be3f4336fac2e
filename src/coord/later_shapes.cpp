// CoordinatedSource::obtain_later: a new graph needed after a method's
// first call (automatic dynamic), met through a claim in the store, never
// a collective (docs/ARCHITECTURE.md, "A new shape after the first call").
#include "coord/coordinated_source.h"

#include <npucache/error.h>

#include "format/names.h"
#include "log/log.h"
#include "process/context.h"
#include "process/env.h"
#include "storage/claims.h"

#include <algorithm>
#include <optional>

namespace npucache::coord {

std::shared_ptr<compiler::CompiledGraph> CoordinatedSource::obtain_later(TraceResult tr, const cache::GraphId& id,
                                                                         const FlatArgs& args,
                                                                         const compiler::CompileStep& compile) {
  // No usable store, nothing to meet in: this rank compiles.
  if (disabled_ || !format::names::valid_graph_key(id.key))
    return MethodSource::obtain_later(std::move(tr), id, args, compile);
  process::Env& env = process::Context::current().env();
  const double t0 = env.monotonic_s();
  const double deadline = t0 + options_.shape_wait_s;
  bool waited = false;
  const auto compile_here = [&](const char* how) {
    report().later_wait_s = waited ? env.monotonic_s() - t0 : 0.0;
    auto g = MethodSource::obtain_later(std::move(tr), id, args, compile);
    report().later = how;
    return g;
  };
  // The claimer's object, read and checked as any stored object (an
  // object of another computation under this key is removed as damaged,
  // never served).
  const auto load = [&]() -> std::shared_ptr<compiler::CompiledGraph> {
    auto stored = cache().stored(cache::MethodCache::Tier::local, id, tr, args, compile);
    if (!stored) return nullptr;
    report().later = "loaded";
    report().later_wait_s = env.monotonic_s() - t0;
    report().fetched = true;
    report().owner = stored->object.meta.producer.global_rank;
    served_compile_s_ = stored->object.meta.compile_time_s;
    persist_entry(*stored->graph, stored->object);
    return stored->graph;
  };
  for (;;) {
    bool unusable = false;
    const auto take = [&]() -> std::optional<storage::Claim> {
      try {
        return storage::Claim::try_take(cache().dir(), id.key);
      } catch (const Error& e) {  // the store cannot hold a claim: nothing to meet in
        log::debug("no compile claim on {} in {} ({}); compiling", id.key, cache().dir(), e.what());
        unusable = true;
        return std::nullopt;
      }
    };
    const std::optional<storage::Claim> claim = take();
    if (unusable) return compile_here(waited ? "waited_then_compiled" : "compiled");
    if (claim) {
      // The previous holder may have stored it after this call first
      // looked, and released the claim since.
      if (auto g = load()) return g;
      log::debug("{}: claimed graph {} of a new shape; compiling it for the job's ranks", cache().method(), id.key);
      return compile_here(waited ? "waited_then_compiled" : "compiled");
    }
    if (!waited)
      log::debug("{}: another rank is compiling graph {} of a new shape; waiting up to {} s for its object",
                 cache().method(), id.key, options_.shape_wait_s);
    waited = true;
    if (auto g = load()) return g;
    const double left = deadline - env.monotonic_s();
    if (left <= 0) {
      log::info(
          "{}: graph {} of a new shape was claimed by another process whose object did not come within {} s "
          "(CoordinatorOptions::shape_wait_s); compiling it here",
          cache().method(), id.key, options_.shape_wait_s);
      return compile_here("waited_then_compiled");
    }
    env.sleep_s(std::min(options_.shape_poll_s, left));
  }
}

}  // namespace npucache::coord
