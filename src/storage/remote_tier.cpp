#include "storage/remote_tier.h"

#include <npucache/error.h>

#include "format/cache_error.h"
#include "format/names.h"
#include "format/tuning_file.h"
#include "log/log.h"
#include "process/context.h"
#include "process/env.h"
#include "process/once.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <tuple>

namespace npucache::storage {
namespace {

using remote::Answer;
using remote::Failure;
using remote::Fault;

// Times a remote call into the counters of `dir`.
class Counted {
 public:
  explicit Counted(std::string dir) : dir_(std::move(dir)), t0_(process::Context::current().env().monotonic_s()) {}
  ~Counted() {
    c.time_s += process::Context::current().env().monotonic_s() - t0_;
    if (!dir_.empty()) record_remote(dir_, c);
  }
  RemoteCounters c;

 private:
  std::string dir_;
  double t0_;
};

std::string cause(const Fault& f) {
  switch (f.kind) {
    case Failure::refused: return "it cannot be reached (" + f.detail + ")";
    case Failure::timeout: return "it did not answer in time (" + f.detail + ")";
    case Failure::auth:
      return "it refused the credentials (" + f.detail +
             "); set NPUCACHE_REMOTE_PASSWORD or NPUCACHE_REMOTE_PASSWORD_FILE";
    case Failure::full: return "it is full and refuses writes (" + f.detail + "); reads go on, writes stop";
    case Failure::dropped: return "it dropped the connection (" + f.detail + ")";
    case Failure::server: return "it answered with an error (" + f.detail + ")";
    case Failure::corrupt: return "it holds a damaged value (" + f.detail + "); that value is not used";
    case Failure::too_large: return "a value is above max-object (" + f.detail + ") and is not sent or read";
    case Failure::untrusted:
      return "it holds a value no trusted key signed (" + f.detail +
             "); that value is not used (NPUCACHE_REMOTE_TRUSTED_KEYS lists the keys trusted)";
  }
  return f.detail;
}

}  // namespace

namespace {

// The process's tiers, one per URL and settings (so one connection each): a
// service of the process context.
struct Tiers {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<RemoteTier>> by_key;
};

}  // namespace

std::shared_ptr<RemoteTier> RemoteTier::get(const remote::Config& config) {
  if (!config.enabled()) return nullptr;
  Tiers& tiers = process::Context::current().get<Tiers>();
  const auto& e = config.endpoint;
  std::string key = config.url + "\n" + e.user + "\n" + e.password + "\n" + (config.read_only ? "ro" : "rw") + "\n" +
                    std::to_string(config.connect_timeout_s) + "\n" + std::to_string(config.timeout_s) + "\n" +
                    std::to_string(config.max_object_bytes) + "\n" + config.signing_key_file + "\n" +
                    config.trusted_keys_file;
  for (const auto& shard : config.shards)
    key += "\n" + shard.url + "\n" + shard.endpoint.user + "\n" + shard.endpoint.password;
  std::lock_guard lock(tiers.mu);
  auto& t = tiers.by_key[key];
  if (!t) t = std::make_shared<RemoteTier>(remote::make_backend(config));
  return t;
}

RemoteTier::RemoteTier(std::unique_ptr<remote::Backend> backend) : backend_(std::move(backend)) {}

void RemoteTier::failed(const Fault& f, const std::string& dir, const std::string& during) {
  // A shard's failures are counted under its name too, with the calls its
  // failure skipped (its keys that went missing).
  const std::string kind(remote::failure_name(f.kind));
  if (!f.shard.empty() && !dir.empty()) {
    RemoteCounters c;
    c.shards[f.shard][f.repeated ? std::string(kSkipped) : kind] = 1;
    record_remote(dir, c);
  }
  if (f.repeated) return;  // counted and warned when it happened
  if (!dir.empty()) {
    RemoteCounters c;
    c.errors[kind] = 1;
    record_remote(dir, c);
  }
  if (f.kind == Failure::full && f.shard.empty()) full_ = true;  // a full shard stops only its writes
  const std::string who = f.shard.empty() ? config().url : f.shard;
  const bool first = process::Context::current().get<process::Once>().first("remote failure|" + who + "|" + kind);
  const std::string text =
      (f.shard.empty() ? "remote cache " + who : "remote cache shard " + who) + " " + during + ": " + cause(f) +
      (f.shard.empty() ? "; the job goes on with the local cache and compiles (counted in `npucache stats`)"
                       : "; its keys are misses, the other shards serve theirs and the job goes on (counted in "
                         "`npucache stats`)");
  if (first)
    log::warn("{}", text);
  else
    log::debug("{}", text);
}

void RemoteTier::partial_faults(const std::string& dir, const std::string& during) {
  for (const Fault& f : backend_->take_partial_faults()) failed(f, dir, during);
}

std::optional<RemoteTier::Object> RemoteTier::fetch(const std::string& hash, const std::string& graph_key,
                                                    const std::string& dir, const Check& check) {
  Answer<std::string> got = [&] {
    Counted t(dir);
    auto a = backend_->get(remote_key::object(graph_key));
    if (a.is_hit()) t.c.bytes_read += a.value().size();
    if (a.is_miss()) t.c.misses += 1;
    return a;
  }();
  if (got.is_failure()) {
    failed(got.fault(), dir, "reading object " + graph_key);
    return std::nullopt;
  }
  if (got.is_miss()) return std::nullopt;
  return verify(std::move(got.value()), hash, graph_key, dir, check);
}

std::optional<RemoteTier::Object> RemoteTier::verify(std::string value, const std::string& hash,
                                                     const std::string& graph_key, const std::string& dir,
                                                     const Check& check) {
  const auto miss = [&](const std::string& why) -> std::optional<Object> {
    log::debug("remote object {} does not serve this call: {}", graph_key, why);
    RemoteCounters m;
    m.misses = 1;
    if (!dir.empty()) record_remote(dir, m);
    return std::nullopt;
  };
  Object o;
  o.hash = hash;
  o.value_bytes = value.size();
  try {
    try {
      o.record = decode_remote_object(value, hash, graph_key, config().max_object_bytes);
    } catch (const CacheError&) {
      // An entry names the hash of the value its writer wrote: a sound value
      // of another hash (written again since, by another compile) is not
      // served for that entry; anything else is damage.
      if (hash.empty()) throw;
      (void)decode_remote_object(value, "", graph_key, config().max_object_bytes);
      return miss("its entry names the object's value " + hash + ", the remote holds another");
    }
    if (check) check(o.record);
  } catch (const CacheError& e) {
    failed({Failure::corrupt, e.what()}, dir, "reading object " + graph_key);
    if (can_write())  // a damaged value is removed, so the next compile's write-back replaces it
      (void)backend_->remove({remote_key::object(graph_key)});
    return std::nullopt;
  } catch (const Error& e) {  // sound, but not for this call (another signature): a miss
    return miss(e.what());
  } catch (const std::bad_alloc&) {  // a failed read, never a crash; the value stays for a process with memory
    failed({Failure::server, "out of memory checking the value"}, dir, "reading object " + graph_key);
    return std::nullopt;
  }
  RemoteCounters hit;
  hit.hits = 1;
  if (!dir.empty()) record_remote(dir, hit);
  return o;
}

std::optional<RemoteTier::Object> RemoteTier::object(const std::string& graph_key, const std::string& dir,
                                                     const Check& check) {
  return fetch("", graph_key, dir, check);
}

std::optional<RemoteTier::Object> RemoteTier::object_by_hash(const std::string& hash, const std::string& graph_key,
                                                             const std::string& dir, const Check& check) {
  return fetch(hash, graph_key, dir, check);
}

std::optional<RemoteEntry> RemoteTier::entry(const std::string& path, const std::string& dir) {
  Answer<std::string> got = [&] {
    Counted t(dir);
    auto a = backend_->get(remote_key::entry(path));
    if (a.is_hit()) t.c.bytes_read += a.value().size();
    if (a.is_miss()) t.c.misses += 1;
    return a;
  }();
  if (got.is_failure()) failed(got.fault(), dir, "reading entry " + path);
  if (!got.is_hit()) return std::nullopt;
  try {
    return decode_remote_entry(got.value(), path, names::model_info_of(path));
  } catch (const Error& e) {
    failed({Failure::corrupt, e.what()}, dir, "reading entry " + path);
    return std::nullopt;
  }
}

std::optional<std::vector<std::pair<std::string, std::string>>> RemoteTier::table(const std::string& prefix,
                                                                                  const std::string& dir,
                                                                                  const std::string& during) {
  Counted t(dir);
  auto keys = backend_->list(prefix);
  partial_faults(dir, during);
  if (keys.is_failure()) {
    failed(keys.fault(), dir, during);
    return std::nullopt;
  }
  std::vector<std::pair<std::string, std::string>> out;
  if (!keys.is_hit() || keys.value().empty()) return out;
  std::vector<Answer<std::string>> values = backend_->get_many(keys.value());
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i].is_failure() && values[i].fault().kind == Failure::untrusted) {
      failed(values[i].fault(), dir, during);  // that record is left out, the others are read
      continue;
    }
    if (values[i].is_failure()) {
      failed(values[i].fault(), dir, during);
      if (!values[i].fault().shard.empty()) continue;  // a failed shard's records are missing
      return std::nullopt;
    }
    if (!values[i].is_hit()) continue;  // removed since the listing
    t.c.bytes_read += values[i].value().size();
    out.emplace_back(keys.value()[i].substr(prefix.size()), std::move(values[i].value()));
  }
  return out;
}

std::optional<std::vector<RemoteEntry>> RemoteTier::entries(const std::string& model_info, const std::string& dir) {
  const std::string during = "listing the entries of " + model_info;
  auto got = table(remote_key::entries(model_info), dir, during);
  if (!got) return std::nullopt;
  std::vector<RemoteEntry> out;
  for (const auto& [rest, value] : *got) {
    const std::string path = model_info + "/" + rest;
    try {
      out.push_back(decode_remote_entry(value, path, model_info));
    } catch (const Error& e) {
      failed({Failure::corrupt, e.what()}, dir, during);
    }
  }
  return out;
}

std::optional<std::vector<std::string>> RemoteTier::models(const std::string& dir) {
  Answer<std::vector<std::string>> got = [&] {
    Counted t(dir);
    return backend_->list(remote_key::entries());
  }();
  partial_faults(dir, "listing its models");
  if (got.is_failure()) {
    failed(got.fault(), dir, "listing its models");
    return std::nullopt;
  }
  std::set<std::string> models;
  if (got.is_hit())
    for (const auto& key : got.value()) {
      const std::string m = names::model_info_of(key.substr(remote_key::entries().size()));
      if (names::valid_name(m)) models.insert(m);
    }
  return std::vector<std::string>(models.begin(), models.end());
}

std::optional<std::vector<RemoteTier::Measured>> RemoteTier::measure(const std::vector<std::string>& graph_keys,
                                                                     const std::string& dir) {
  // A few objects at a time: at most a few values of max-object in memory.
  constexpr std::size_t kBatch = 8;
  std::vector<Measured> out;
  for (std::size_t at = 0; at < graph_keys.size(); at += kBatch) {
    std::vector<std::string> keys;
    for (std::size_t i = at; i < graph_keys.size() && i < at + kBatch; ++i)
      keys.push_back(remote_key::object(graph_keys[i]));
    Counted t(dir);
    for (auto& a : backend_->get_many(keys)) {
      Measured m;
      if (a.is_failure() && a.fault().kind == Failure::untrusted) {
        failed(a.fault(), dir, "measuring objects");  // not one a pull would read: none
        out.push_back(std::move(m));
        continue;
      }
      if (a.is_failure()) {
        failed(a.fault(), dir, "measuring objects");
        if (a.fault().shard.empty()) return std::nullopt;
        out.push_back(std::move(m));  // on a failed shard: missing
        continue;
      }
      if (a.is_hit()) {
        t.c.bytes_read += a.value().size();
        m = {content_hash(a.value()), a.value().size()};
      }
      out.push_back(std::move(m));
    }
  }
  return out;
}

RemoteTier::Pushed RemoteTier::push(const std::vector<ObjectRecord>& objects, const std::vector<EntryRecord>& entries,
                                    const std::string& dir) {
  Pushed p;
  if (!can_write()) return p;
  Counted t(dir);
  const auto fail = [&](const Fault& f, const std::string& during) {
    p.failed = true;
    failed(f, dir, during);
    return p;
  };
  std::map<std::string, std::string> hash_of;  // graph key -> content hash of the value written now
  std::set<std::string> skipped;
  for (const auto& o : objects) {
    if (o.raw.size() > config().max_object_bytes) {
      ++p.skipped;
      skipped.insert(o.graph_key);
      failed({Failure::too_large, "object " + o.graph_key + " has " + std::to_string(o.raw.size()) +
                                      " bytes; max-object is " + std::to_string(config().max_object_bytes)},
             dir, "writing");
      continue;
    }
    // Written once: a graph key the remote holds keeps its object.
    const std::string value = encode_remote_object(o);
    if (value.size() > config().max_value_bytes()) {  // every reader would refuse it
      ++p.skipped;
      skipped.insert(o.graph_key);
      failed({Failure::too_large, "object " + o.graph_key + " is a value of " + std::to_string(value.size()) +
                                      " bytes with its record and graph text, more than readers take (max-object " +
                                      std::to_string(config().max_object_bytes) + " and its envelope)"},
             dir, "writing");
      continue;
    }
    auto put = backend_->put(remote_key::object(o.graph_key), value, remote::Overwrite::no);
    if (put.is_failure() && !put.fault().shard.empty()) {  // the other shards take their objects
      fail(put.fault(), "writing object " + o.graph_key);
      skipped.insert(o.graph_key);
      continue;
    }
    if (put.is_failure()) return fail(put.fault(), "writing object " + o.graph_key);
    if (!put.value()) {
      ++p.present;
      continue;
    }
    t.c.bytes_written += value.size();
    t.c.writes += 1;
    ++p.objects;
    hash_of[o.graph_key] = content_hash(value);
  }
  for (const auto& e : entries) {
    if (skipped.count(e.graph_key)) {
      ++p.skipped;
      continue;
    }
    const auto h = hash_of.find(e.graph_key);
    const std::string v = encode_remote_entry({e, h == hash_of.end() ? "" : h->second});
    auto put = backend_->put(remote_key::entry(e.path), v, remote::Overwrite::yes);
    if (put.is_failure() && !put.fault().shard.empty()) {
      fail(put.fault(), "writing entry " + e.path);
      continue;
    }
    if (put.is_failure()) return fail(put.fault(), "writing entry " + e.path);
    t.c.bytes_written += v.size();
    t.c.writes += 1;
    ++p.entries;
  }
  return p;
}

std::vector<compiler::TuningRecord> RemoteTier::tuning(const std::string& dir) {
  std::vector<compiler::TuningRecord> out;
  const auto kind = BlobKind::tuning;
  for (const auto& [name, bytes] : blobs(kind, dir)) {
    try {
      compiler::TuningRecord r = decode_tuning_record(bytes, "remote tuning record");
      if (r.runtime + "\n" + r.key != name) throw CacheError("remote tuning record " + name + " names another kernel");
      out.push_back(std::move(r));
    } catch (const Error& e) {
      failed({Failure::corrupt, e.what()}, dir, "reading the tuning table");
    }
  }
  return out;
}

void RemoteTier::push_tuning(const std::vector<compiler::TuningRecord>& records, const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> named;
  for (const auto& r : records) named.emplace_back(r.runtime + "\n" + r.key, encode_tuning_record(r));
  push_blobs(BlobKind::tuning, named, remote::Overwrite::no, dir);
}

std::optional<std::string> RemoteTier::blob(BlobKind kind, const std::string& name, const std::string& dir) {
  const std::string during = "reading a " + std::string(blob_kind_name(kind)) + " record";
  Counted t(dir);
  auto got = backend_->get(remote_key::blob(blob_kind_name(kind), name));
  if (got.is_failure()) failed(got.fault(), dir, during);
  if (!got.is_hit()) return std::nullopt;
  t.c.bytes_read += got.value().size();
  try {
    return decode_blob(got.value(), kind, name).bytes;
  } catch (const Error& e) {
    failed({Failure::corrupt, e.what()}, dir, during);
    return std::nullopt;
  }
}

std::vector<std::pair<std::string, std::string>> RemoteTier::blobs(BlobKind kind, const std::string& dir,
                                                                   const std::string& name_prefix) {
  const std::string during = "reading the " + std::string(blob_kind_name(kind)) + " records";
  std::vector<std::pair<std::string, std::string>> out;
  const auto got = table(remote_key::blobs(blob_kind_name(kind), name_prefix), dir, during);
  if (!got) return out;
  for (const auto& [rest, value] : *got) {
    const std::string name = name_prefix + rest;
    try {
      out.emplace_back(name, decode_blob(value, kind, name).bytes);
    } catch (const Error& e) {
      failed({Failure::corrupt, e.what()}, dir, during);
    }
  }
  return out;
}

void RemoteTier::push_blobs(BlobKind kind, const std::vector<std::pair<std::string, std::string>>& records,
                            remote::Overwrite overwrite, const std::string& dir) {
  if (!can_write() || records.empty()) return;
  Counted t(dir);
  for (const auto& [name, bytes] : records) {
    const std::string value = encode_blob({kind, name, bytes});
    if (value.size() > std::min(config().max_value_bytes(), kMaxRecordPayload)) {  // every reader would refuse it
      failed({Failure::too_large, std::string(blob_kind_name(kind)) + " record " + name + " has " +
                                      std::to_string(value.size()) + " bytes, more than readers take"},
             dir, "writing");
      continue;
    }
    auto put = backend_->put(remote_key::blob(blob_kind_name(kind), name), value, overwrite);
    if (put.is_failure()) {
      failed(put.fault(), dir, "writing " + std::string(blob_kind_name(kind)) + " records");
      if (!put.fault().shard.empty()) continue;  // the other shards take theirs
      return;
    }
    if (put.value()) {
      t.c.bytes_written += value.size();
      t.c.writes += 1;
    }
  }
}

}  // namespace npucache::storage
