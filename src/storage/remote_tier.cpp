#include "storage/remote_tier.h"

#include <npucache/error.h>

#include "format/cache_error.h"
#include "format/names.h"
#include "format/tuning_file.h"
#include "log/log.h"
#include "process/context.h"
#include "process/env.h"
#include "process/once.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

namespace npucache::cache {
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
    case Failure::too_large: return "an object is above max-object (" + f.detail + ") and is not sent";
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
  const std::string key = config.url + "\n" + e.user + "\n" + e.password + "\n" + (config.read_only ? "ro" : "rw") +
                          "\n" + std::to_string(config.connect_timeout_s) + "\n" + std::to_string(config.timeout_s) +
                          "\n" + std::to_string(config.max_object_bytes);
  std::lock_guard lock(tiers.mu);
  auto& t = tiers.by_key[key];
  if (!t) t = std::make_shared<RemoteTier>(remote::make_redis_backend(config));
  return t;
}

RemoteTier::RemoteTier(std::unique_ptr<remote::Backend> backend) : backend_(std::move(backend)) {}

void RemoteTier::failed(const Fault& f, const std::string& dir, const std::string& during) {
  if (f.repeated) return;  // counted and warned when it happened
  if (!dir.empty()) {
    RemoteCounters c;
    c.errors[std::string(remote::failure_name(f.kind))] = 1;
    record_remote(dir, c);
  }
  if (f.kind == Failure::full) full_ = true;
  const bool first = process::Context::current().get<process::Once>().first("remote failure|" + config().url + "|" +
                                                                            std::string(remote::failure_name(f.kind)));
  const std::string text = "remote cache " + config().url + " " + during + ": " + cause(f) +
                           "; the job goes on with the local cache and compiles (counted in `npucache stats`)";
  if (first)
    log::warn("{}", text);
  else
    log::debug("{}", text);
}

std::optional<RemoteTier::Object> RemoteTier::fetch(const std::string& hash, const std::string& graph_key,
                                                    const std::string& dir, const Check& check) {
  Answer<std::string> got = [&] {
    Counted t(dir);
    auto a = backend_->get(remote_key::object(hash));
    if (a.is_hit()) t.c.bytes_read += a.value().size();
    if (a.is_miss()) t.c.misses += 1;
    return a;
  }();
  if (got.is_failure()) {
    failed(got.fault(), dir, "reading object " + hash);
    return std::nullopt;
  }
  if (got.is_miss()) return std::nullopt;
  return verify(std::move(got.value()), hash, graph_key, dir, check);
}

std::optional<RemoteTier::Object> RemoteTier::verify(std::string value, const std::string& hash,
                                                     const std::string& graph_key, const std::string& dir,
                                                     const Check& check) {
  Object o;
  o.hash = hash;
  o.value_bytes = value.size();
  try {
    o.record = decode_remote_object(value, hash, graph_key, config().max_object_bytes);
    if (check) check(o.record);
  } catch (const CacheError& e) {
    failed({Failure::corrupt, e.what()}, dir, "reading object " + hash);
    if (can_write())  // a damaged value is removed, so the next compile's write-back replaces it
      (void)backend_->remove({remote_key::object(hash), remote_key::graph(graph_key)});
    return std::nullopt;
  } catch (const Error& e) {  // sound, but not for this call (another signature): a miss
    log::debug("remote object {} does not serve this call: {}", hash, e.what());
    RemoteCounters miss;
    miss.misses = 1;
    if (!dir.empty()) record_remote(dir, miss);
    return std::nullopt;
  }
  RemoteCounters hit;
  hit.hits = 1;
  if (!dir.empty()) record_remote(dir, hit);
  return o;
}

std::string RemoteTier::object_hash(const std::string& graph_key, const std::string& dir) {
  Answer<std::string> ref = [&] {
    Counted t(dir);
    auto a = backend_->get(remote_key::graph(graph_key));
    if (a.is_hit()) t.c.bytes_read += a.value().size();
    if (a.is_miss()) t.c.misses += 1;
    return a;
  }();
  if (ref.is_failure()) failed(ref.fault(), dir, "looking up graph key " + graph_key);
  if (!ref.is_hit()) return "";
  try {
    return decode_graph_ref(ref.value(), graph_key).object_hash;
  } catch (const Error& e) {
    failed({Failure::corrupt, e.what()}, dir, "looking up graph key " + graph_key);
    if (can_write()) (void)backend_->remove({remote_key::graph(graph_key)});
    return "";
  }
}

std::optional<RemoteTier::Object> RemoteTier::object(const std::string& graph_key, const std::string& dir,
                                                     const Check& check) {
  // The reference and the object it names, in one round trip.
  auto got = [&] {
    Counted t(dir);
    auto a = backend_->get_referenced(remote_key::graph(graph_key), kGraphRefHashAt, kGraphRefHashLen,
                                      remote_key::object(""));
    if (a.is_hit()) t.c.bytes_read += a.value().value.size() + (a.value().target ? a.value().target->size() : 0);
    if (a.is_miss() || (a.is_hit() && !a.value().target)) t.c.misses += 1;
    return a;
  }();
  if (got.is_failure()) {
    failed(got.fault(), dir, "reading graph key " + graph_key);
    return std::nullopt;
  }
  if (got.is_miss()) return std::nullopt;
  std::string hash;
  try {
    hash = decode_graph_ref(got.value().value, graph_key).object_hash;
  } catch (const Error& e) {
    failed({Failure::corrupt, e.what()}, dir, "looking up graph key " + graph_key);
    if (can_write()) (void)backend_->remove({remote_key::graph(graph_key)});
    return std::nullopt;
  }
  if (!got.value().target) return std::nullopt;  // its object is gone (counted as a miss)
  return verify(std::move(*got.value().target), hash, graph_key, dir, check);
}

std::optional<RemoteTier::Object> RemoteTier::object_by_hash(const std::string& hash, const std::string& graph_key,
                                                             const std::string& dir, const Check& check) {
  return fetch(hash, graph_key, dir, check);
}

std::optional<RemoteEntry> RemoteTier::entry(const std::string& path, const std::string& dir) {
  const std::string model_info = names::model_info_of(path);
  Answer<std::string> got = [&] {
    Counted t(dir);
    auto a = backend_->hash_get(remote_key::index(model_info), path);
    if (a.is_hit()) t.c.bytes_read += a.value().size();
    if (a.is_miss()) t.c.misses += 1;
    return a;
  }();
  if (got.is_failure()) failed(got.fault(), dir, "reading entry " + path);
  if (!got.is_hit()) return std::nullopt;
  try {
    return decode_remote_entry(got.value(), path, model_info);
  } catch (const Error& e) {
    failed({Failure::corrupt, e.what()}, dir, "reading entry " + path);
    return std::nullopt;
  }
}

std::optional<std::vector<RemoteEntry>> RemoteTier::entries(const std::string& model_info, const std::string& dir) {
  Answer<remote::Fields> got = [&] {
    Counted t(dir);
    auto a = backend_->hash_all(remote_key::index(model_info));
    if (a.is_hit())
      for (const auto& [f, v] : a.value()) t.c.bytes_read += f.size() + v.size();
    return a;
  }();
  if (got.is_failure()) {
    failed(got.fault(), dir, "listing the entries of " + model_info);
    return std::nullopt;
  }
  std::vector<RemoteEntry> out;
  if (got.is_miss()) return out;
  for (const auto& [path, value] : got.value()) {
    try {
      out.push_back(decode_remote_entry(value, path, model_info));
    } catch (const Error& e) {
      failed({Failure::corrupt, e.what()}, dir, "listing the entries of " + model_info);
    }
  }
  return out;
}

std::optional<std::vector<std::string>> RemoteTier::models(const std::string& dir) {
  Answer<std::vector<std::string>> got = [&] {
    Counted t(dir);
    return backend_->set_members(remote_key::models());
  }();
  if (got.is_failure()) {
    failed(got.fault(), dir, "listing its models");
    return std::nullopt;
  }
  std::vector<std::string> out;
  if (got.is_hit())
    for (auto& m : got.value())
      if (names::valid_name(m)) out.push_back(std::move(m));
  return out;
}

std::optional<std::vector<std::size_t>> RemoteTier::object_sizes(const std::vector<std::string>& hashes,
                                                                 const std::string& dir) {
  std::vector<std::string> keys;
  for (const auto& h : hashes) keys.push_back(remote_key::object(h));
  auto got = [&] {
    Counted t(dir);
    return backend_->sizes(keys);
  }();
  if (got.is_failure()) {
    failed(got.fault(), dir, "measuring objects");
    return std::nullopt;
  }
  return got.value();
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
  std::map<std::string, std::string> hash_of;  // graph key -> object hash (stored or written now)
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
    auto ref = backend_->get(remote_key::graph(o.graph_key));
    if (ref.is_failure()) return fail(ref.fault(), "writing object " + o.graph_key);
    if (ref.is_hit()) {
      try {
        hash_of[o.graph_key] = decode_graph_ref(ref.value(), o.graph_key).object_hash;
        ++p.present;
        continue;
      } catch (const Error&) {
        // a damaged reference is replaced below
      }
    }
    const std::string value = encode_remote_object(o);
    const std::string hash = content_hash(value);
    auto put = backend_->put(remote_key::object(hash), value, remote::Overwrite::no);
    if (put.is_failure()) return fail(put.fault(), "writing object " + o.graph_key);
    t.c.bytes_written += value.size();
    GraphRef g{o.graph_key, hash, value.size(), o.raw.size(), o.meta.with_program, o.meta.checksum};
    const std::string gv = encode_graph_ref(g);
    auto put_ref = backend_->put(remote_key::graph(o.graph_key), gv,
                                 ref.is_hit() ? remote::Overwrite::yes : remote::Overwrite::no);
    if (put_ref.is_failure()) return fail(put_ref.fault(), "writing object " + o.graph_key);
    t.c.bytes_written += gv.size();
    t.c.writes += 2;
    ++p.objects;
    hash_of[o.graph_key] = hash;
  }
  std::map<std::string, remote::Fields> by_model;
  for (const auto& e : entries) {
    if (skipped.count(e.graph_key)) {
      ++p.skipped;
      continue;
    }
    const auto h = hash_of.find(e.graph_key);
    const std::string v = encode_remote_entry({e, h == hash_of.end() ? "" : h->second});
    t.c.bytes_written += v.size();
    by_model[names::model_info_of(e.path)].emplace_back(e.path, v);
  }
  for (const auto& [model_info, fields] : by_model) {
    auto put = backend_->hash_put(remote_key::index(model_info), fields, remote::Overwrite::yes);
    if (put.is_failure()) return fail(put.fault(), "writing the entries of " + model_info);
    auto add = backend_->set_add(remote_key::models(), model_info);
    if (add.is_failure()) return fail(add.fault(), "writing the entries of " + model_info);
    p.entries += fields.size();
    t.c.writes += fields.size();
  }
  return p;
}

std::vector<compiler::TuningRecord> RemoteTier::tuning(const std::string& dir) {
  std::vector<compiler::TuningRecord> out;
  const auto kind = BlobKind::tuning;
  auto got = [&] {
    Counted t(dir);
    auto a = backend_->hash_all(remote_key::blob(blob_kind_name(kind)));
    if (a.is_hit())
      for (const auto& [f, v] : a.value()) t.c.bytes_read += f.size() + v.size();
    return a;
  }();
  if (got.is_failure()) failed(got.fault(), dir, "reading the tuning table");
  if (!got.is_hit()) return out;
  for (const auto& [name, value] : got.value()) {
    try {
      const BlobRecord b = decode_blob(value, kind, name);
      compiler::TuningRecord r = decode_tuning_record(b.bytes, "remote tuning record");
      if (r.runtime + "\n" + r.key != name) throw CacheError("remote tuning record " + name + " names another kernel");
      out.push_back(std::move(r));
    } catch (const Error& e) {
      failed({Failure::corrupt, e.what()}, dir, "reading the tuning table");
    }
  }
  return out;
}

void RemoteTier::push_tuning(const std::vector<compiler::TuningRecord>& records, const std::string& dir) {
  if (!can_write() || records.empty()) return;
  Counted t(dir);
  remote::Fields fields;
  for (const auto& r : records) {
    const std::string name = r.runtime + "\n" + r.key;
    fields.emplace_back(name, encode_blob({BlobKind::tuning, name, encode_tuning_record(r)}));
    t.c.bytes_written += fields.back().second.size();
  }
  auto put = backend_->hash_put(remote_key::blob(blob_kind_name(BlobKind::tuning)), fields, remote::Overwrite::no);
  if (put.is_failure())
    failed(put.fault(), dir, "writing the tuning table");
  else
    t.c.writes += put.value();
}

}  // namespace npucache::cache

namespace npucache::cache {

std::optional<std::string> RemoteTier::blob(BlobKind kind, const std::string& name, const std::string& dir) {
  Counted t(dir);
  auto got = backend_->hash_get(remote_key::blob(blob_kind_name(kind)), name);
  if (got.is_failure()) failed(got.fault(), dir, "reading a " + std::string(blob_kind_name(kind)) + " record");
  if (!got.is_hit()) return std::nullopt;
  t.c.bytes_read += got.value().size();
  try {
    return decode_blob(got.value(), kind, name).bytes;
  } catch (const Error& e) {
    failed({Failure::corrupt, e.what()}, dir, "reading a " + std::string(blob_kind_name(kind)) + " record");
    return std::nullopt;
  }
}

std::vector<std::pair<std::string, std::string>> RemoteTier::blobs(BlobKind kind, const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> out;
  Counted t(dir);
  auto got = backend_->hash_all(remote_key::blob(blob_kind_name(kind)));
  if (got.is_failure()) failed(got.fault(), dir, "reading the " + std::string(blob_kind_name(kind)) + " records");
  if (!got.is_hit()) return out;
  for (const auto& [name, value] : got.value()) {
    t.c.bytes_read += name.size() + value.size();
    try {
      out.emplace_back(name, decode_blob(value, kind, name).bytes);
    } catch (const Error& e) {
      failed({Failure::corrupt, e.what()}, dir, "reading the " + std::string(blob_kind_name(kind)) + " records");
    }
  }
  return out;
}

void RemoteTier::push_blobs(BlobKind kind, const std::vector<std::pair<std::string, std::string>>& records,
                            remote::Overwrite overwrite, const std::string& dir) {
  if (!can_write() || records.empty()) return;
  Counted t(dir);
  remote::Fields fields;
  for (const auto& [name, bytes] : records) {
    fields.emplace_back(name, encode_blob({kind, name, bytes}));
    t.c.bytes_written += fields.back().second.size();
  }
  auto put = backend_->hash_put(remote_key::blob(blob_kind_name(kind)), fields, overwrite);
  if (put.is_failure())
    failed(put.fault(), dir, "writing " + std::string(blob_kind_name(kind)) + " records");
  else
    t.c.writes += put.value();
}

}  // namespace npucache::cache
