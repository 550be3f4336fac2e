#include "storage/side_files.h"

#include "compiler/tuning_table.h"
#include "format/cache_error.h"
#include "format/names.h"
#include "format/profile_file.h"
#include "format/tuning_file.h"
#include "storage/remote_tier.h"
#include "storage/uncached.h"

#include <algorithm>
#include <optional>
#include <tuple>
#include "log/log.h"
#include "process/context.h"
#include "process/once.h"

namespace npucache::storage {
namespace {

// The tuning file's decisions: nullopt when there is none; CacheError when
// it is damaged or not npucache's.
std::optional<std::vector<compiler::TuningRecord>> read_tuning(const Dir& d) {
  const std::string what = (d.path() / names::kTuningFile).string();
  auto bytes = d.read(names::kTuningFile, kMaxTuningFileBytes);
  if (!bytes) return std::nullopt;
  return decode_tuning(*bytes, what);
}

// A file of another cache format (format/cache_error.h) is another
// build's: never rewritten (its writers keep its decisions; this process
// keeps its own).
bool other_format(const CacheError& e) { return dynamic_cast<const format::OtherFormat*>(&e) != nullptr; }

void warn_damaged_tuning(const CacheError& e, const std::string& dir) {
  if (other_format(e))
    warn_uncached(dir, "tuning format",
                  std::string(e.what()) +
                      "; its decisions are not read, and it is left as it is (this process keeps "
                      "its own decisions)");
  else
    log::warn("{}; its decisions are ignored and it is rewritten on the next save", e.what());
}

// The profiles file's records: nullopt when there is none; CacheError when
// it is damaged or not npucache's.
std::optional<std::vector<ProfileRecord>> read_profiles(const Dir& d) {
  const std::string what = (d.path() / names::kProfileFile).string();
  auto bytes = d.read(names::kProfileFile, kMaxProfileFileBytes);
  if (!bytes) return std::nullopt;
  return decode_profiles(*bytes, what);
}

void warn_damaged_profiles(const CacheError& e, const std::string& dir) {
  if (other_format(e))
    warn_uncached(dir, "profiles format",
                  std::string(e.what()) + "; its dynamic-shape decisions are not read, and it is left as it is");
  else
    log::warn("{}; its dynamic-shape decisions are ignored and it is rewritten on the next save", e.what());
}

// A remote profile record's name for `method` of `model_info`.
std::string profile_name(const std::string& model_info, const std::string& method, const DimMark& m) {
  return profile_blob_name({model_info, method, m});
}

std::optional<DimMark> parse_profile_name(const std::string& name, const std::string& model_info,
                                          const std::string& method) {
  auto r = parse_profile_blob_name(name);
  if (!r || r->model_info != model_info || r->method != method) return std::nullopt;
  return r->dim;
}

}  // namespace

std::string profile_blob_name(const ProfileRecord& r) {
  return r.model_info + "|" + r.method + "|" + r.dim.input + "|" + std::to_string(r.dim.dim);
}

std::optional<ProfileRecord> parse_profile_blob_name(const std::string& name) {
  const auto a = name.find('|'), b = name.find('|', a + 1), c = name.rfind('|');
  if (a == std::string::npos || b == std::string::npos || c <= b) return std::nullopt;
  ProfileRecord r{name.substr(0, a), name.substr(a + 1, b - a - 1), {name.substr(b + 1, c - b - 1), -1}};
  const std::string dim = name.substr(c + 1);
  if (dim.empty() || dim.size() > 3 || dim.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  r.dim.dim = std::stoll(dim);
  // The checks of the file's records (an encoded record must decode).
  try {
    return decode_profile_record(encode_profile_record(r), "remote dynamic-shape dim " + name);
  } catch (const CacheError&) {
    return std::nullopt;
  }
}

std::vector<compiler::TuningRecord> stored_tuning(const Store& store) {
  try {
    if (auto r = read_tuning(store.directory())) return std::move(*r);
  } catch (const CacheRefused&) {
    throw;
  } catch (const CacheError& e) {
    warn_damaged_tuning(e, store.dir().string());
  }
  return {};
}

std::vector<ProfileRecord> stored_profiles(const Store& store) {
  try {
    if (auto r = read_profiles(store.directory())) return std::move(*r);
  } catch (const CacheRefused&) {
    throw;
  } catch (const CacheError& e) {
    warn_damaged_profiles(e, store.dir().string());
  }
  return {};
}

std::size_t add_tuning(const Store& store, const std::vector<compiler::TuningRecord>& records) {
  if (records.empty()) return 0;
  const Dir& d = store.directory();
  FileLock lock = d.sub(names::kLocksDir, Create::yes).lock(names::kTuningLock);
  compiler::TuningTable table;
  bool rewrite = false;
  try {
    if (auto r = read_tuning(d)) table.merge(*r);
  } catch (const CacheRefused&) {
    throw;
  } catch (const IoError&) {
    throw;  // unread, not damaged: its decisions are kept
  } catch (const CacheError& e) {
    warn_damaged_tuning(e, store.dir().string());
    if (other_format(e)) return 0;
    rewrite = true;
  }
  const std::size_t added = table.merge(records);
  if (added == 0 && !rewrite) return 0;
  d.write(names::kTuningFile, encode_tuning(table.records()));
  return added;
}

std::size_t add_profiles(const Store& store, const std::vector<ProfileRecord>& records) {
  if (records.empty()) return 0;
  const Dir& d = store.directory();
  FileLock lock = d.sub(names::kLocksDir, Create::yes).lock(names::kProfileLock);
  std::vector<ProfileRecord> all;
  bool rewrite = false;
  try {
    if (auto r = read_profiles(d)) all = std::move(*r);
  } catch (const CacheRefused&) {
    throw;
  } catch (const IoError&) {
    throw;  // unread, not damaged: its records are kept
  } catch (const CacheError& e) {
    warn_damaged_profiles(e, store.dir().string());
    if (other_format(e)) return 0;
    rewrite = true;
  }
  std::size_t added = 0;
  for (const auto& r : records) {
    auto at = std::lower_bound(all.begin(), all.end(), r);
    if (at != all.end() && *at == r) continue;
    all.insert(at, r);
    ++added;
  }
  if (added == 0 && !rewrite) return 0;
  d.write(names::kProfileFile, encode_profiles(all));
  return added;
}

SideFiles::SideFiles(std::string dir, std::shared_ptr<RemoteTier> remote)
    : dir_(std::move(dir)), remote_(std::move(remote)) {}

void SideFiles::load_tuning(const Store* store) const {
  if (!process::Context::current().get<process::Once>().first("tuning loaded|" + dir_)) return;
  if (remote_) {  // the fleet's decisions (the remote's shared table)
    const auto records = remote_->tuning(dir_);
    const std::size_t added = compiler::TuningTable::process().merge(records);
    log::debug("remote tuning table: {} decisions, {} new to this process", records.size(), added);
  }
  try {
    if (!store) return;
    if (auto records = read_tuning(store->directory())) {
      const std::size_t added = compiler::TuningTable::process().merge(*records);
      log::debug("tuning table {}/{}: {} decisions, {} new to this process", dir_, names::kTuningFile, records->size(),
                 added);
    }
  } catch (const CacheRefused& e) {
    log::debug("tuning table not read: {}", e.what());
  } catch (const CacheError& e) {
    warn_damaged_tuning(e, dir_);
  }
}

void SideFiles::save_tuning(const Store& store) const {
  try {
    const Dir& d = store.directory();
    FileLock lock = d.sub(names::kLocksDir, Create::yes).lock(names::kTuningLock);
    compiler::TuningTable& table = compiler::TuningTable::process();
    std::vector<compiler::TuningRecord> stored;
    bool rewrite = false;
    try {
      if (auto r = read_tuning(d)) stored = std::move(*r);
    } catch (const CacheRefused&) {
      throw;
    } catch (const IoError&) {
      throw;  // unread, not damaged: its decisions are kept
    } catch (const CacheError& e) {
      warn_damaged_tuning(e, dir_);
      if (other_format(e)) return;
      rewrite = true;
    }
    table.merge(stored);
    const std::vector<compiler::TuningRecord> all = table.records();
    if (all.empty()) return;
    // The file is ordered as records() is: equal means nothing to add.
    std::sort(stored.begin(), stored.end(),
              [](const auto& a, const auto& b) { return std::tie(a.runtime, a.key) < std::tie(b.runtime, b.key); });
    if (!rewrite && stored == all) return;
    d.write(names::kTuningFile, encode_tuning(all));
    log::debug("tuning table {}/{}: {} decisions saved", dir_, names::kTuningFile, all.size());
  } catch (const Error& e) {
    warn_uncached(
        dir_, "tuning",
        "could not save the tuning table in " + dir_ + " (" + e.what() + "); its decisions stay in this process");
  }
}

std::vector<DimMark> SideFiles::load_profile(const Store* store, const std::string& model_info,
                                             const std::string& method) const {
  std::vector<DimMark> out;
  try {
    if (auto records = store ? read_profiles(store->directory()) : std::nullopt)
      for (const auto& r : *records)
        if (r.model_info == model_info && r.method == method) out.push_back(r.dim);
  } catch (const CacheRefused& e) {
    log::debug("dynamic-shape profiles not read: {}", e.what());
  } catch (const CacheError& e) {
    warn_damaged_profiles(e, dir_);
  }
  if (remote_)
    for (const auto& [name, bytes] : remote_->blobs(BlobKind::profile, dir_, model_info + "|" + method + "|"))
      if (auto m = parse_profile_name(name, model_info, method))
        if (std::find(out.begin(), out.end(), *m) == out.end()) out.push_back(std::move(*m));
  if (!out.empty()) log::debug("{}/{}: {} dims dynamic from the profiles of {}", model_info, method, out.size(), dir_);
  return out;
}

void SideFiles::save_profile(const Store& store, const std::string& model_info, const std::string& method,
                             const std::vector<DimMark>& dims) const {
  if (dims.empty()) return;
  try {
    const Dir& d = store.directory();
    FileLock lock = d.sub(names::kLocksDir, Create::yes).lock(names::kProfileLock);
    std::vector<ProfileRecord> records;
    bool rewrite = false, leave = false;
    try {
      if (auto r = read_profiles(d)) records = std::move(*r);
    } catch (const CacheRefused&) {
      throw;
    } catch (const IoError&) {
      throw;  // unread, not damaged: its records are kept
    } catch (const CacheError& e) {
      warn_damaged_profiles(e, dir_);
      leave = other_format(e);
      rewrite = true;
    }
    for (const auto& m : dims) {
      ProfileRecord r{model_info, method, m};
      auto at = std::lower_bound(records.begin(), records.end(), r);
      if (at != records.end() && *at == r) continue;
      records.insert(at, std::move(r));
      rewrite = true;
    }
    if (remote_) {
      std::vector<std::pair<std::string, std::string>> named;
      for (const auto& m : dims) named.emplace_back(profile_name(model_info, method, m), "");
      remote_->push_blobs(BlobKind::profile, named, remote::Overwrite::no, dir_);
    }
    if (!rewrite || leave) return;
    d.write(names::kProfileFile, encode_profiles(records));
    log::debug("dynamic-shape profiles {}/{}: {} dims saved", dir_, names::kProfileFile, records.size());
  } catch (const Error& e) {
    warn_uncached(dir_, "profiles",
                  "could not save the dynamic-shape profile of " + model_info + "/" + method + " in " + dir_ + " (" +
                      e.what() + "); the decision stays in this process");
  }
}

}  // namespace npucache::storage
