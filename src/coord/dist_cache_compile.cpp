// dist::cache_compile (include/npucache/coordinator.h): the method cache of
// cache_compile (cache/cache_compile.h) with the coordinator as the source
// of its entries (or, in the independent baseline, a local source that
// compiles on every miss).
#include <npucache/coordinator.h>
#include <npucache/error.h>

#include "cache/cache_compile.h"
#include "cache/source.h"
#include "compiler/engine.h"
#include "coord/coordinated_source.h"
#include "coord/reports.h"
#include "process/dry_run.h"

#include <cmath>

namespace npucache {

std::shared_ptr<detail::CompiledFunction> dist::detail::make_coordinated_function(const nn::Module& module,
                                                                                  const CacheOptions& options,
                                                                                  const CoordinatorOptions& coord) {
  if (!(coord.timeout_s > 0) || !std::isfinite(coord.timeout_s))
    throw ConfigError("CoordinatorOptions::timeout_s must be a positive, finite number of seconds (got " +
                      std::to_string(coord.timeout_s) + "): it bounds every collective of the coordinator");
  if (!(coord.shape_wait_s > 0) || !std::isfinite(coord.shape_wait_s) || !(coord.shape_poll_s > 0) ||
      !std::isfinite(coord.shape_poll_s) || coord.shape_poll_s > coord.shape_wait_s)
    throw ConfigError(
        "CoordinatorOptions::shape_wait_s and shape_poll_s must be positive, finite numbers of seconds "
        "with the poll no longer than the wait (got wait " +
        std::to_string(coord.shape_wait_s) + ", poll " + std::to_string(coord.shape_poll_s) +
        "): they bound how long a rank waits for another rank's compile of a new shape");
  if (coord.dry_run && coord.independent)
    throw ConfigError(
        "CoordinatorOptions::dry_run predicts the coordinated plan; the independent baseline has none (unset "
        "independent or dry_run)");
  const CompilerConfig config = cache::cached_config(options);
  if (options.compile.disable) return npucache::detail::make_function(module, options.compile, nullptr);
  // The dry run is the process's (process/dry_run.h): never mixed.
  if (!process::Context::current().get<process::DryRun>().claim(coord.dry_run))
    throw ConfigError(coord.dry_run ? "dist::cache_compile of " + options.compile.method_name +
                                          ": CoordinatorOptions::dry_run in a process that already built cached "
                                          "functions that compile and write; a dry run writes nothing anywhere in "
                                          "its process, so run it as a process of its own"
                                    : "dist::cache_compile of " + options.compile.method_name +
                                          ": this process is a dry run (CoordinatorOptions::dry_run), which "
                                          "compiles and writes nothing; build functions that do in another process");
  cache::warn_ineffective_options(options, config);
  // Coordinated, rank 0 summarises each method's entries (CoordinatedSource).
  auto cache = cache::method_cache(module, options, config, true, !coord.independent);
  std::shared_ptr<compiler::EntrySource> source;
  const cache::MethodSource::ReportSink reports{coord::add_report, coord::amend_report};
  if (coord.independent)
    source = std::make_shared<cache::LocalSource>(std::move(cache), reports, /*compile_every_miss=*/true);
  else
    source = std::make_shared<coord::CoordinatedSource>(std::move(cache), coord, reports);
  return npucache::detail::make_function(module, options.compile, std::move(source));
}

}  // namespace npucache
