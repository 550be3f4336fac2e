#include "cache/region_library.h"

#include <npucache/error.h>
#include <npucache/ir/hash.h>

#include "compiler/link_program.h"
#include "format/names.h"
#include "log/log.h"
#include "process/context.h"
#include "process/env.h"
#include "storage/regions.h"
#include "storage/store.h"

#include <algorithm>
#include <optional>
#include <set>

namespace npucache::cache {

RegionLibrary::RegionLibrary(storage::Store store, CompilerConfig config, format::RegionValidity validity,
                             double wait_s, double poll_s)
    : dir_(store.dir().string()),
      store_(std::move(store)),
      config_(std::move(config)),
      validity_(std::move(validity)),
      wait_s_(wait_s),
      poll_s_(poll_s) {
  validity_.config = config_.hash().hex();
  hints_.compiled_regions = &stored_;
  hints_.region_compiled = [this](const std::string& region, const compiler::CompiledRegion& r) { keep(region, r); };
}

RegionLibrary::~RegionLibrary() { finish(); }

std::string RegionLibrary::key_of(const std::string& region) const {
  format::RegionValidity v = validity_;
  v.region = region;
  return format::region_key(v);
}

std::optional<compiler::CompiledRegion> RegionLibrary::read(const std::string& region) {
  try {
    auto r = storage::read_region(store_, key_of(region));
    if (!r) return std::nullopt;
    // What it is valid for, field by field (the key joins them with '|',
    // which a runtime version or a decomposition name may hold).
    format::RegionValidity want = validity_;
    want.region = region;
    if (r->validity != want)
      throw CacheError("compiled region file " + key_of(region) + " is valid for other settings than its name says");
    // Compiled from another trace of the same body: named as this one is.
    return compiler::renamed_region(std::move(r->artifact.compiled), canonical_symbols(r->artifact.body),
                                    bodies_.at(region));
  } catch (const CacheRefused& e) {
    if (reported_.insert(region).second) log::warn("compiled region {} not used: {}", region, e.what());
  } catch (const CacheError& e) {
    // Damaged, or of another region under this name: compiled here and
    // stored in its place.
    if (reported_.insert(region).second) {
      ++damaged_;
      log::warn("{}; the region is compiled again", e.what());
    }
  } catch (const std::exception& e) {
    log::debug("compiled region {} not read from {}: {}", region, dir_, e.what());
  }
  return std::nullopt;
}

void RegionLibrary::prepare(const TraceResult& trace) {
  process::Env& env = process::Context::current().env();
  bodies_ = trace.regions;
  // In key order: a region is settled (taken, claimed, or given up on)
  // before the next is looked at. One deadline bounds the waits of all.
  const double deadline = env.monotonic_s() + wait_s_;
  for (const auto& [region, body] : trace.regions) {
    if (auto r = read(region)) {
      stored_.emplace(region, std::move(*r));
      continue;
    }
    const double t0 = env.monotonic_s();
    bool waiting = false;
    for (;;) {
      bool no_store = false;
      const auto take = [&]() -> std::optional<storage::Claim> {
        try {
          return storage::Claim::try_take(dir_, key_of(region));
        } catch (const std::exception& e) {  // no store to meet in: compiled here
          log::debug("no claim on region {} in {} ({}); compiling it", region, dir_, e.what());
          no_store = true;
          return std::nullopt;
        }
      };
      std::optional<storage::Claim> claim = take();
      if (no_store) break;
      if (claim) {
        // The previous holder may have stored it just before releasing.
        if (auto r = read(region)) {
          stored_.emplace(region, std::move(*r));
        } else {
          std::lock_guard lock(mu_);
          claims_.emplace(region, std::move(*claim));
        }
        break;
      }
      if (!waiting) {
        log::debug("region {} is being compiled by another process; waiting up to {} s for it", region, wait_s_);
        waiting = true;
      }
      if (auto r = read(region)) {
        stored_.emplace(region, std::move(*r));
        break;
      }
      const double left = deadline - env.monotonic_s();
      if (left <= 0) {
        ++timed_out_;
        log::info("region {} was claimed by another process whose program did not come within {} s; compiling it here",
                  region, wait_s_);
        break;
      }
      env.sleep_s(std::min(poll_s_, left));
    }
    if (waiting) {
      wait_total_s_ += env.monotonic_s() - t0;
      if (stored_.count(region)) ++waited_;
    }
  }
}

void RegionLibrary::keep(const std::string& region, const compiler::CompiledRegion& r) {
  std::optional<storage::Claim> claim;
  {
    std::lock_guard lock(mu_);
    auto it = claims_.find(region);
    if (it != claims_.end()) {
      claim.emplace(std::move(it->second));
      claims_.erase(it);
    }
  }
  const auto body = bodies_.find(region);
  if (body == bodies_.end()) return;
  try {
    compiler::RegionArtifact a{region, body->second, config_, r};
    format::RegionValidity v = validity_;
    v.region = region;
    const std::string bytes = format::encode_region_file(v, a);
    // A short wait for a sweep: a region file only spares compiles.
    const auto held = store_.writing(kStoreWaitSeconds);
    storage::put_region(store_, format::region_key(v), bytes, held, replace_ || reported_.count(region) > 0);
  } catch (const std::exception& e) {  // the next compile of this region compiles it again
    log::debug("compiled region {} not stored in {}: {}", region, dir_, e.what());
  }
  // The claim is released here, after the region is stored.
}

void RegionLibrary::distrust() {
  stored_.clear();
  replace_ = true;
}

void RegionLibrary::finish() {
  std::lock_guard lock(mu_);
  claims_.clear();
}

}  // namespace npucache::cache
