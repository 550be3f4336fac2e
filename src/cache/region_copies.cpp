#include "cache/region_copies.h"

#include <npucache/ir/hash.h>

#include "cache/region_library.h"
#include "compiler/link_program.h"
#include "compiler/passes.h"
#include "compiler/serialize.h"
#include "format/cache_error.h"
#include "format/keys.h"
#include "format/names.h"
#include "log/log.h"
#include "storage/regions.h"
#include "storage/stats.h"

#include <utility>
#include <vector>

namespace npucache::cache {
namespace {

// A region of an object as it runs: an archived object's (without its
// program) is lowered from its optimized body with its decisions, as its
// loader lowers it.
compiler::CompiledRegion as_it_runs(const compiler::CompiledRegion& r, const CompilerConfig& config) {
  if (!r.program.steps.empty()) return r;
  return compiler::lower_region(r.optimized, r.autotune, config);
}

}  // namespace

int copy_regions(const storage::Store& s, const compiler::CompiledGraph& g, format::RegionValidity validity) {
  if (g.regions.empty()) return 0;
  if (validity.decompositions != "default") {
    log::debug("compiled regions not copied to {}: custom decompositions ({})", s.dir().string(),
               validity.decompositions);
    return 0;
  }
  validity.config = g.config.hash().hex();
  // The files of the regions regions/ lacks, made before the lock is taken.
  std::vector<std::pair<std::string, std::string>> files;  // key, bytes
  for (const auto& [region, compiled] : g.regions) {
    try {
      const auto body = g.trace.regions.find(region);
      if (body == g.trace.regions.end()) continue;
      format::RegionValidity v = validity;
      v.region = region;
      const std::string key = format::region_key(v);
      if (storage::has_region(s, key)) continue;
      compiler::RegionArtifact a{region, body->second, g.config, as_it_runs(compiled, g.config)};
      // An object holding its program keeps neither the optimized body nor
      // its hash after decomposition: both made again, as the compile made
      // them (graph passes are a function of the body, config and table).
      if (a.compiled.optimized.size() == 0)
        a.compiled.optimized = compiler::region_graph_passes(body->second, g.config, {}, &a.compiled.decomposed);
      else
        a.compiled.decomposed = canonical_hash(compiler::decompose(body->second)).hex();
      files.emplace_back(key, format::encode_region_file(v, a));
    } catch (const std::exception& e) {
      log::debug("compiled region {} not copied to {}: {}", region, s.dir().string(), e.what());
    }
  }
  if (files.empty()) return 0;
  int stored = 0;
  try {
    // One short wait for a sweep (gc, clear) for all of them.
    const auto held = s.writing(RegionLibrary::kStoreWaitSeconds);
    for (const auto& [key, bytes] : files) {
      try {
        if (storage::put_region(s, key, bytes, held)) ++stored;
      } catch (const std::exception& e) {
        log::debug("compiled region {} not copied to {}: {}", key, s.dir().string(), e.what());
      }
    }
  } catch (const std::exception& e) {
    log::info("{} compiled regions not copied to {}: {}", files.size(), s.dir().string(), e.what());
  }
  if (stored > 0) storage::record_regions(s.dir(), 0, 0, static_cast<uint64_t>(stored));
  return stored;
}

namespace {

bool same_decisions(const std::vector<compiler::AutotuneDecision>& a,
                    const std::vector<compiler::AutotuneDecision>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].key != b[i].key || a[i].chosen != b[i].chosen || a[i].candidates != b[i].candidates ||
        a[i].steps != b[i].steps || a[i].timed_on != b[i].timed_on)
      return false;
  return true;
}

// The region `mine` (of a program) is the region `stored` (a region file's):
// what runs is the same, and what it was tuned to.
bool same_region(const compiler::CompiledRegion& mine, const compiler::CompiledRegion& stored) {
  return !mine.program.steps.empty() && same_decisions(mine.autotune, stored.autotune) &&
         compiler::serialize_program(mine.program) == compiler::serialize_program(stored.program);
}

}  // namespace

bool regions_held(const storage::Store& s, const compiler::CompiledGraph& g, format::RegionValidity validity,
                  bool mark_used) {
  validity.config = g.config.hash().hex();
  for (const auto& [region, compiled] : g.regions) {
    format::RegionValidity v = validity;
    v.region = region;
    const auto body = g.trace.regions.find(region);
    if (body == g.trace.regions.end()) return false;
    std::optional<format::RegionRecord> stored;
    try {
      stored = storage::read_region(s, format::region_key(v), mark_used);
    } catch (const CacheRefused&) {
      throw;
    } catch (const CacheError& e) {  // damaged: it vouches for nothing
      log::debug("compiled region {} not vouched for by {}: {}", region, s.dir().string(), e.what());
      return false;
    }
    if (!stored) return false;
    try {
      // The file names the symbols as the trace that compiled it did; the
      // program as this trace names them (a compile that took the file
      // renamed it so).
      const compiler::CompiledRegion as_stored =
          compiler::renamed_region(stored->artifact.compiled, canonical_symbols(stored->artifact.body), body->second);
      if (!same_region(as_it_runs(compiled, g.config), as_stored)) return false;
      // An archived object's region is its optimized body (a copy writes
      // it, and a later load lowers it again): that body too.
      if (compiled.program.steps.empty() && canonical_hash(compiled.optimized) != canonical_hash(as_stored.optimized))
        return false;
    } catch (const std::exception& e) {  // not lowered or renamed: it vouches for nothing
      log::debug("compiled region {} not vouched for by {}: {}", region, s.dir().string(), e.what());
      return false;
    }
  }
  return true;
}

compiler::CompiledGraph regions_of(const compiler::CompiledGraph& g) {
  compiler::CompiledGraph r;
  r.config = g.config;
  r.regions = g.regions;
  r.trace.regions = g.trace.regions;
  return r;
}

std::optional<format::RegionValidity> region_validity_of(const format::Components& c) {
  namespace k = format::component;
  const auto get = [&](const char* name) -> std::optional<std::string> {
    const auto it = c.find(name);
    if (it == c.end()) return std::nullopt;
    return it->second;
  };
  const auto runtime = get(k::kRuntimeVersion), decompositions = get(k::kDecompositions), dynamic = get(k::kDynamic),
             format = get(k::kFormatVersion);
  if (!runtime || !decompositions || !dynamic || !format || *format != names::kFormatVersion) return std::nullopt;
  format::RegionValidity v;
  v.runtime_version = *runtime;
  v.decompositions = *decompositions;
  if (*dynamic == "auto")
    v.dynamic = "auto";
  else if (*dynamic == "true")
    v.dynamic = "dynamic";
  else if (*dynamic == "false")
    v.dynamic = "static";
  else
    return std::nullopt;
  v.format_version = *format;
  return v;
}

}  // namespace npucache::cache
