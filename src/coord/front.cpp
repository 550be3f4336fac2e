// The entry points of cache_compile and dist::cache_compile: resolve who is
// writing, build the method's cache and source, and hand them to the
// engine.
#include <npucache/cache.h>
#include <npucache/coordinator.h>
#include <npucache/error.h>

#include "cache/source.h"
#include "compiler/engine.h"
#include "compiler/surface.h"
#include "coord/coordinated_source.h"
#include "coord/identity.h"
#include "coord/reports.h"
#include "log/log.h"

#include <cmath>

namespace npucache {
namespace {

// The effective compiler config of a cached method (ConfigError for
// options that contradict each other).
CompilerConfig resolved(const CacheOptions& o) { return compiler::resolve_surface(o.compile).config; }

}  // namespace

std::shared_ptr<detail::CompiledFunction> detail::make_cached_function(const nn::Module& module,
                                                                       const CacheOptions& options) {
  const CompilerConfig config = resolved(options);
  if (options.ge_cache && config.captures())
    log::warn(
        "ge_cache has no effect in reduce-overhead mode: {} always stores its compiled program and its capture "
        "templates",
        options.compile.method_name);
  if (options.compile.disable) return make_function(module, options.compile, nullptr);
  auto cache = std::make_shared<cache::MethodCache>(coord::resolve_identity(module, options, config, false));
  auto source = std::make_shared<cache::LocalSource>(std::move(cache), nullptr);
  return make_function(module, options.compile, std::move(source));
}

std::shared_ptr<detail::CompiledFunction> dist::detail::make_coordinated_function(const nn::Module& module,
                                                                                  const CacheOptions& options,
                                                                                  const CoordinatorOptions& coord) {
  if (!(coord.timeout_s > 0) || !std::isfinite(coord.timeout_s))
    throw ConfigError("CoordinatorOptions::timeout_s must be a positive, finite number of seconds (got " +
                      std::to_string(coord.timeout_s) + "): it bounds every collective of the coordinator");
  const CompilerConfig config = resolved(options);
  if (options.compile.disable) return npucache::detail::make_function(module, options.compile, nullptr);
  auto cache = std::make_shared<cache::MethodCache>(coord::resolve_identity(module, options, config, true));
  std::shared_ptr<compiler::EntrySource> source;
  if (coord.independent)
    source = std::make_shared<cache::LocalSource>(std::move(cache), coord::add_report, /*compile_every_miss=*/true);
  else
    source = std::make_shared<coord::CoordinatedSource>(std::move(cache), coord, coord::add_report);
  return npucache::detail::make_function(module, options.compile, std::move(source));
}

}  // namespace npucache
