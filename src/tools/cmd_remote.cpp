// `npucache remote`: the remote tier's commands (docs/GUIDE.md).
//   remote push [D] [--model M]     writes a local cache's entries and objects to the remote
//   remote pull MODEL [D]           fills a local cache with a model's entries from the remote
//   remote ls [MODEL] [--json]      the remote's models, entries and sizes
//   remote keygen DIR               a signing key for signed publishing
// push and pull take the cache directory as the cache commands do
// (positional or --cache-dir); push, pull and ls take --remote URL
// (default: $NPUCACHE_REMOTE, else remote of the user's npucache.conf),
// --signing-key FILE and --trusted-keys FILE (default: the variables).
// Unlike a job, a command that cannot use the remote fails (exit status 1)
// naming why.
#include <npucache/cache.h>
#include <npucache/error.h>

#include "admin/admin.h"
#include "admin/remote_admin.h"
#include "cache/remote_options.h"
#include "log/progress.h"
#include "storage/remote_tier.h"
#include "tools/commands.h"

#include <nlohmann/json.hpp>

#include <cstdio>

namespace npucache::tools {
namespace {

// --remote, --signing-key, --trusted-keys.
struct RemoteArgs {
  std::string url, signing_key, trusted_keys;
};

remote::Config remote_of(const RemoteArgs& a) {
  RemoteOptions o;
  o.url = a.url;
  o.signing_key_file = a.signing_key;
  o.trusted_keys_file = a.trusted_keys;
  remote::Config c = cache::resolve_remote(o);
  if (!c.enabled())
    throw ConfigError("no remote cache: give --remote redis://host:port or file:///dir, or set NPUCACHE_REMOTE");
  return c;
}

void cmd_push(const RemoteArgs& url, const std::string& d, const std::string& model) {
  const remote::Config c = remote_of(url);
  const std::string dir = dir_or_default(d);
  const auto p = [&] {
    const log::Progress progress("pushing " + dir + " to " + c.url);
    return cache::admin::remote_push(c, dir, model);
  }();
  std::printf("pushed %zu entries, %zu objects to %s (%zu objects were there already", p.entries, p.objects,
              c.url.c_str(), p.present);
  if (p.skipped) std::printf(", %zu above max-object not sent", p.skipped);
  std::printf("; %zu tuning decisions, %zu capture templates, %zu dynamic-shape dims offered)\n", p.tuning, p.templates,
              p.profile_dims);
}

void cmd_pull(const RemoteArgs& url, const std::string& model, const std::string& d) {
  const remote::Config c = remote_of(url);
  const std::string dir = dir_or_default(d);
  const auto p = [&] {
    const log::Progress progress("pulling " + model + " from " + c.url);
    return cache::admin::remote_pull(c, model, dir);
  }();
  for (const auto& pr : p.problems) std::printf("left out %s\n", pr.c_str());
  std::printf(
      "pulled %zu entries, %zu objects (%zu bytes read) of %zu model(s) into %s; %zu new tuning decisions, %zu new "
      "dynamic-shape dims, %zu new compiled regions",
      p.entries, p.objects, p.bytes, p.models.size(), dir.c_str(), p.tuning, p.profile_dims, p.regions);
  if (p.kept_later) std::printf("; kept %zu entries the cache saved after the remote's", p.kept_later);
  std::printf("\n");
  if (!p.problems.empty()) set_exit_code(1);
}

void cmd_ls(const RemoteArgs& url, const std::string& model, bool json) {
  const remote::Config c = remote_of(url);
  const auto models = cache::admin::remote_ls(c, model);
  // A tier of several servers: each shard, reachable or not, and its share.
  const auto shards =
      c.shards.empty() ? std::vector<cache::admin::RemoteListedShard>{} : cache::admin::remote_shards(c, models);
  std::size_t entries = 0, objects = 0, bytes = 0;
  for (const auto& m : models) {
    entries += m.entries.size();
    objects += m.objects;
    bytes += m.bytes;
  }
  if (json) {
    nlohmann::json ms = nlohmann::json::array();
    for (const auto& m : models) {
      nlohmann::json es = nlohmann::json::array();
      for (const auto& e : m.entries)
        es.push_back({{"path", e.path},
                      {"object", e.graph_key},
                      {"object_hash", e.object_hash},
                      {"mode", e.mode},
                      {"object_bytes", e.object_bytes}});
      ms.push_back({{"model_info", m.model_info}, {"entries", es}, {"objects", m.objects}, {"bytes", m.bytes}});
    }
    nlohmann::json j = {
        {"remote", c.url}, {"models", ms}, {"entries", entries}, {"objects", objects}, {"bytes", bytes}};
    if (!shards.empty()) {
      j["shards"] = nlohmann::json::array();
      for (const auto& s : shards)
        j["shards"].push_back({{"url", s.url},
                               {"reachable", s.failure.empty()},
                               {"failure", s.failure},
                               {"keys", s.keys},
                               {"objects", s.objects},
                               {"bytes", s.bytes}});
    }
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("%-72s %-12s %-16s %10s\n", "entry", "object", "mode", "bytes");
  for (const auto& m : models)
    for (const auto& e : m.entries)
      std::printf("%-72s %-12s %-16s %10zu%s\n", e.path.c_str(), e.graph_key.substr(0, 12).c_str(), e.mode.c_str(),
                  e.object_bytes, e.object_hash.empty() || e.object_bytes == 0 ? "  (object missing)" : "");
  std::printf("%zu model(s), %zu entries, %zu objects, %s in %s\n", models.size(), entries, objects,
              cache::format_size(bytes).c_str(), c.url.c_str());
  for (const auto& s : shards) {
    if (s.failure.empty())
      std::printf("shard %s: reachable, %zu keys, %zu objects listed above, %s\n", s.url.c_str(), s.keys, s.objects,
                  cache::format_size(s.bytes).c_str());
    else
      std::printf("shard %s: failed, %s; its keys are missing above\n", s.url.c_str(), s.failure.c_str());
  }
}

void cmd_keygen(const std::string& dir) {
  const auto k = cache::admin::remote_keygen(dir);
  std::printf("wrote %s (secret, mode 0600) and %s\nkey %s: %s\n", k.secret_file.c_str(), k.public_file.c_str(),
              k.key_id.c_str(), k.public_key.c_str());
  std::printf("writers: NPUCACHE_REMOTE_SIGNING_KEY=%s; readers: add the line of %s to their trusted keys file\n",
              k.secret_file.c_str(), k.public_file.c_str());
}

}  // namespace

void add_remote_commands(CLI::App& app) {
  auto url = std::make_shared<RemoteArgs>();
  auto dir = std::make_shared<std::string>();
  auto model = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  const std::string url_help =
      "redis://host:port[/db], redis+unix:///path or file:///shared/dir, or several such URLs separated by commas "
      "(shards) (default: $NPUCACHE_REMOTE)";
  const auto add_remote = [&](CLI::App* cmd) {
    cmd->add_option("--remote", url->url, url_help);
    cmd->add_option("--signing-key", url->signing_key,
                    "sign what is written with this signing.key (default: $NPUCACHE_REMOTE_SIGNING_KEY)");
    cmd->add_option("--trusted-keys", url->trusted_keys,
                    "use only values signed by a public key of this file (default: $NPUCACHE_REMOTE_TRUSTED_KEYS)");
  };
  auto* remote = app.add_subcommand("remote", "the remote cache tier: remote push|pull|ls|keygen");
  remote->require_subcommand(1);

  auto* push = remote->add_subcommand("push", "write a local cache's entries and objects to the remote");
  const auto push_dir = add_cache_dir(push);
  push->add_option("--model", *model, "only the models whose model_info starts with this");
  add_remote(push);
  push->callback([=] { cmd_push(*url, push_dir->given(), *model); });

  auto* pull = remote->add_subcommand("pull", "fill a local cache with a model's entries from the remote");
  pull->add_option("model", *model, "a model_info, or a model class (every model_info of it)")->required();
  const auto pull_dir = add_cache_dir(pull);
  add_remote(pull);
  pull->callback([=] { cmd_pull(*url, *model, pull_dir->given()); });

  auto* ls = remote->add_subcommand("ls", "the remote's models, entries and sizes");
  ls->add_option("model", *model, "a model_info or a model class (default: every model)");
  add_remote(ls);
  ls->add_flag("--json", *json, "print JSON");
  ls->callback([=] { cmd_ls(*url, *model, *json); });

  auto* keygen = remote->add_subcommand(
      "keygen", "write a new signing key for signed publishing: DIR/signing.key (0600) and DIR/signing.pub");
  keygen->add_option("dir", *dir, "the directory of the key files (made when missing)")->required();
  keygen->callback([=] { cmd_keygen(*dir); });
}

}  // namespace npucache::tools
