#include "admin/remote_admin.h"

#include "admin/admin.h"
#include "cache/own_key.h"
#include "cache/runnable.h"
#include "compiler/serialize.h"
#include "format/cache_error.h"
#include "format/keys.h"
#include "format/names.h"
#include "format/profile_file.h"
#include "format/template_file.h"
#include "format/tuning_file.h"
#include "log/log.h"
#include "log/progress.h"
#include "remote/sharded_backend.h"
#include "remote/signing.h"
#include "storage/remote_tier.h"
#include "storage/side_files.h"
#include "storage/store.h"

#include <algorithm>
#include <map>
#include <set>

namespace npucache::cache::admin {
namespace {

// The tier of a command: errors are the command's.
std::shared_ptr<RemoteTier> tier_for(const remote::Config& c) {
  auto t = RemoteTier::get(c);
  if (!t) throw ConfigError("no remote cache: give --remote URL or set NPUCACHE_REMOTE");
  return t;
}

[[noreturn]] void unreachable(const remote::Config& c, const std::string& what) {
  throw CacheError("remote cache " + c.url + ": " + what + " failed (the warning above names the cause)");
}

bool matches(const std::string& model_info, const std::string& model) {
  return model.empty() || model_info == model ||
         (model_info.size() > model.size() && model_info.compare(0, model.size(), model) == 0 &&
          model_info[model.size()] == '_');
}

std::vector<std::string> matching_models(RemoteTier& t, const std::string& model) {
  auto all = t.models("");
  if (!all) unreachable(t.config(), "listing its models");
  std::vector<std::string> out;
  for (const auto& m : *all)
    if (matches(m, model)) out.push_back(m);
  return out;
}

}  // namespace

RemotePush remote_push(const remote::Config& c, const std::string& dir, const std::string& model) {
  auto t = tier_for(c);
  if (c.read_only) throw ConfigError("remote cache " + c.url + " is read-only here: push writes to it");
  const Bundle all = read_cache(dir, kAdminWaitSeconds, false);
  std::map<std::string, std::vector<EntryRecord>> by_model;
  for (const auto& e : all.entries)
    if (matches(names::model_info_of(e.path), model)) by_model[names::model_info_of(e.path)].push_back(e);
  std::map<std::string, const ObjectRecord*> objects;
  for (const auto& o : all.objects) objects[o.graph_key] = &o;
  RemotePush out;
  for (const auto& [m, es] : by_model) {
    log::Progress::note("pushing " + m);
    std::vector<ObjectRecord> os;
    std::set<std::string> seen;
    for (const auto& e : es)
      if (seen.insert(e.graph_key).second) os.push_back(*objects.at(e.graph_key));
    const RemoteTier::Pushed p = t->push(os, es, dir);
    if (p.failed) unreachable(c, "writing " + m);
    out.entries += p.entries;
    out.objects += p.objects;
    out.present += p.present;
    out.skipped += p.skipped;
  }
  // The capture templates of the pushed objects, and the models' profiles.
  std::vector<std::pair<std::string, std::string>> templates, legacy;
  for (const auto& [key, file] : all.templates) {
    const TemplateRecord r = decode_template_file(file, "template " + key);
    for (const auto& [m, es] : by_model)
      if (std::any_of(es.begin(), es.end(),
                      [&](const EntryRecord& e) { return e.graph_key == r.validity.graph_key; })) {
        (is_variant_key(key) ? templates : legacy).emplace_back(key, file);
        break;
      }
  }
  t->push_blobs(BlobKind::template_variant, templates, remote::Overwrite::no, dir);
  t->push_blobs(BlobKind::capture_template, legacy, remote::Overwrite::no, dir);
  out.templates = templates.size() + legacy.size();
  const Store s = Store::open(dir, Create::no);
  if (auto bytes = s.directory().read(names::kProfileFile, kMaxProfileFileBytes)) {
    try {
      std::vector<std::pair<std::string, std::string>> dims;
      for (const auto& r : decode_profiles(*bytes, (s.dir() / names::kProfileFile).string()))
        if (matches(r.model_info, model)) dims.emplace_back(profile_blob_name(r), "");
      t->push_blobs(BlobKind::profile, dims, remote::Overwrite::no, dir);
      out.profile_dims = dims.size();
    } catch (const CacheError& e) {
      log::warn("{}; not pushed", e.what());
    }
  }
  // The directory's tuning table joins the shared one.
  if (auto bytes = s.directory().read(names::kTuningFile, kMaxTuningFileBytes)) {
    try {
      const auto records = decode_tuning(*bytes, (s.dir() / names::kTuningFile).string());
      t->push_tuning(records, dir);
      out.tuning = records.size();
    } catch (const CacheError& e) {
      log::warn("{}; not pushed", e.what());
    }
  }
  return out;
}

RemotePull remote_pull(const remote::Config& c, const std::string& model, const std::string& dir) {
  if (model.empty())
    throw ConfigError("remote pull needs a model: a model_info or a class name (`npucache remote ls`)");
  auto t = tier_for(c);
  RemotePull out;
  out.models = matching_models(*t, model);
  if (out.models.empty())
    throw CacheError("remote cache " + c.url + " holds no model '" + model + "' (`npucache remote ls` lists them)");
  Bundle b;
  std::map<std::string, bool> fetched;  // graph key -> usable
  for (const auto& m : out.models) {
    auto es = t->entries(m, dir);
    if (!es) unreachable(c, "reading the entries of " + m);
    for (auto& re : *es) {
      const std::string& key = re.entry.graph_key;
      std::string why;  // what the checks found (a damaged value is counted and removed by the tier)
      // The mix-up rule (cache/own_key.h): the object decodes with the
      // entry's parameters and its own trace gives its key.
      const RemoteTier::Check agrees = [&](const ObjectRecord& r) {
        try {
          const Decoded d = decode(r, re.entry.parameters);
          check_own_key(*d.graph, key, key_inputs_of(re.entry, *d.graph));
        } catch (const CacheError& e) {
          why = e.what();
          throw;
        }
      };
      if (!fetched.count(key)) {
        log::Progress::note("reading object " + std::to_string(b.objects.size() + 1));
        auto o =
            re.object_hash.empty() ? t->object(key, dir, agrees) : t->object_by_hash(re.object_hash, key, dir, agrees);
        fetched[key] = o.has_value();
        if (o) {
          out.bytes += o->value_bytes;
          b.objects.push_back(std::move(o->record));
        }
      } else if (fetched[key]) {  // the object another entry pulled: it must agree with this one too
        try {
          for (const auto& o : b.objects)
            if (o.graph_key == key) agrees(o);
        } catch (const CacheError&) {
          out.problems.push_back(re.entry.path + ": " + why + "; not pulled");
          continue;
        }
      }
      if (!fetched[key]) {
        out.problems.push_back(re.entry.path + ": its object " + key +
                               (why.empty() ? " is missing or damaged in the remote" : " is refused: " + why));
        continue;
      }
      // The entry records the checksum of the object it is committed with.
      for (const auto& o : b.objects)
        if (o.graph_key == key) re.entry.object_checksum = o.meta.checksum;
      b.entries.push_back(std::move(re.entry));
    }
  }
  if (b.entries.empty()) return out;
  // The capture templates of the pulled objects.
  auto stored = t->blobs(BlobKind::template_variant, dir);
  for (auto& named : t->blobs(BlobKind::capture_template, dir)) stored.push_back(std::move(named));
  for (auto& [key, file] : stored) {
    try {
      const TemplateRecord r = decode_template_file(file, "remote capture template " + key);
      if (!names::valid_template_key(key) || !names_template(key, r.validity))
        throw CacheError("remote capture template " + key + " is not named by its content's key");
      if (std::any_of(b.objects.begin(), b.objects.end(),
                      [&](const ObjectRecord& o) { return o.graph_key == r.validity.graph_key; }))
        b.templates.emplace_back(key, std::move(file));
    } catch (const CacheError& e) {
      t->failed({remote::Failure::corrupt, e.what()}, dir, "reading a capture template");
    }
  }
  // The decisions that are not programs, so the pulled methods start warm:
  // the shared tuning table (each record checked by the tier) and the
  // pulled models' dynamic-shape dims (names checked as the file's records).
  b.tuning = t->tuning(dir);
  for (const auto& m : out.models)
    for (const auto& [name, bytes] : t->blobs(BlobKind::profile, dir, m + "|")) {
      auto r = parse_profile_blob_name(name);
      if (r && r->model_info == m)
        b.profiles.push_back(std::move(*r));
      else
        t->failed({remote::Failure::corrupt, "a dynamic-shape dim named '" + name + "' is malformed"}, dir,
                  "reading the dynamic-shape profiles");
    }
  std::sort(b.profiles.begin(), b.profiles.end());
  b.profiles.erase(std::unique(b.profiles.begin(), b.profiles.end()), b.profiles.end());
  // A signed remote vouches for its programs' regions; an unsigned one's
  // programs are claims, whose regions are not spread.
  if (!t->authenticated())
    for (const auto& o : b.objects) b.unvouched.insert(o.graph_key);
  const Transfer tr = import_records(std::move(b), dir);
  out.entries = tr.entries;
  out.objects = tr.objects;
  out.tuning = tr.tuning;
  out.profile_dims = tr.profile_dims;
  out.regions = tr.regions;
  out.kept_later = tr.kept_later;
  return out;
}

std::vector<RemoteListedModel> remote_ls(const remote::Config& c, const std::string& model) {
  auto t = tier_for(c);
  std::vector<RemoteListedModel> out;
  for (const auto& m : matching_models(*t, model)) {
    RemoteListedModel lm;
    lm.model_info = m;
    auto es = t->entries(m, "");
    if (!es) unreachable(c, "reading the entries of " + m);
    // Each object read once: the seam has no size call, and what ls shows
    // is what a pull would read.
    std::vector<std::string> keys;
    for (const auto& re : *es)
      if (std::find(keys.begin(), keys.end(), re.entry.graph_key) == keys.end()) keys.push_back(re.entry.graph_key);
    auto measured = t->measure(keys, "");
    if (!measured) unreachable(c, "measuring the objects of " + m);
    std::map<std::string, RemoteTier::Measured> of;  // graph key -> its object's hash and bytes
    for (std::size_t i = 0; i < keys.size(); ++i) of[keys[i]] = (*measured)[i];
    for (const auto& re : *es) {
      RemoteListedEntry e;
      e.path = re.entry.path;
      e.graph_key = re.entry.graph_key;
      e.object_hash = of[e.graph_key].hash;
      const auto mode = re.entry.meta.components.find(component::kMode);
      e.mode = mode == re.entry.meta.components.end() ? "?" : mode->second;
      e.object_bytes = of[e.graph_key].value_bytes;
      lm.entries.push_back(std::move(e));
    }
    for (const auto& [k, o] : of)
      if (o.value_bytes > 0) {
        ++lm.objects;
        lm.bytes += o.value_bytes;
      }
    out.push_back(std::move(lm));
  }
  return out;
}

std::vector<RemoteListedShard> remote_shards(const remote::Config& c, const std::vector<RemoteListedModel>& listed) {
  auto t = tier_for(c);
  remote::Backend* servers = &t->backend();  // below the signing layer, if any
  while (remote::Backend* w = servers->wrapped()) servers = w;
  auto* sharded = dynamic_cast<remote::ShardedBackend*>(servers);
  const std::size_t n = sharded ? sharded->shard_count() : 1;
  std::vector<RemoteListedShard> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    remote::Backend& b = sharded ? sharded->shard(i) : *servers;
    out[i].url = b.config().url;
    auto keys = b.list(remote_key::prefix());
    if (keys.is_failure()) {
      const remote::Fault& f = keys.fault();
      out[i].failure = std::string(remote::failure_name(f.kind)) + " (" + f.detail + ")";
      if (!f.repeated) {  // counted as the tier counts a failure (a skipped shard was, when it failed)
        remote::Fault named = f;
        named.shard = sharded ? out[i].url : "";
        t->failed(named, "", "listing its keys");
      }
    } else if (keys.is_hit()) {
      out[i].keys = keys.value().size();
    }
  }
  std::set<std::string> seen;
  for (const auto& m : listed)
    for (const auto& e : m.entries)
      if (e.object_bytes > 0 && seen.insert(e.graph_key).second) {
        auto& s = out[sharded ? sharded->shard_of(remote_key::object(e.graph_key)) : 0];
        ++s.objects;
        s.bytes += e.object_bytes;
      }
  return out;
}

RemoteKeygen remote_keygen(const std::string& dir) {
  if (dir.empty()) throw ConfigError("remote keygen needs a directory for signing.key and signing.pub");
  const remote::signing::PublicKey k = remote::signing::write_key_files(dir);
  return {dir + "/" + std::string(remote::signing::kSecretFile), dir + "/" + std::string(remote::signing::kPublicFile),
          k.text(), k.id()};
}

}  // namespace npucache::cache::admin
