#include "compiler/tuning_table.h"

#include <npucache/device.h>

#include "process/context.h"

namespace npucache::compiler {

TuningTable& TuningTable::process() { return process::Context::current().get<TuningTable>(); }

std::optional<TuningEntry> TuningTable::find(const std::string& runtime, const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find({runtime, key});
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

bool TuningTable::add(const std::string& runtime, const std::string& key, const TuningEntry& e) {
  std::lock_guard lock(mu_);
  auto [it, inserted] = entries_.try_emplace({runtime, key}, e);
  if (inserted) return true;
  if (e.candidates <= it->second.candidates) return false;
  it->second = e;
  return true;
}

std::size_t TuningTable::merge(const std::vector<TuningRecord>& records) {
  std::size_t changed = 0;
  for (const auto& r : records) changed += add(r.runtime, r.key, r.entry) ? 1 : 0;
  return changed;
}

std::vector<TuningRecord> TuningTable::records() const {
  std::lock_guard lock(mu_);
  std::vector<TuningRecord> out;
  out.reserve(entries_.size());
  for (const auto& [k, e] : entries_) out.push_back({k.first, k.second, e});
  return out;
}

std::size_t TuningTable::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

void TuningTable::clear() {
  std::lock_guard lock(mu_);
  entries_.clear();
}

std::string tuning_runtime(int device) {
  const DeviceProperties& p = Platform::get().device(device).properties();
  return p.name + " runtime " + p.runtime_version;
}

TuningEntry tuning_entry(const AutotuneDecision& d) {
  return {d.chosen, d.best_us, d.default_us, d.candidates, d.timed_on};
}

std::size_t merge_decisions(const std::vector<AutotuneDecision>& decisions, const std::string& runtime) {
  std::size_t changed = 0;
  for (const auto& d : decisions)
    if (!d.key.empty() && !d.chosen.empty())
      changed += TuningTable::process().add(runtime, d.key, tuning_entry(d)) ? 1 : 0;
  return changed;
}

}  // namespace npucache::compiler
