// The cache inspection and management commands:
// ls, stats, verify and explain take --json (one JSON document on stdout,
// the same facts as the text).
//   ls [D] [--model NAME]...   entries with their object, mode, size, last use
//   readable ENTRY [-o FILE]   readable text of one entry
//                              (ENTRY as ls prints it, or its path)
//   verify [D] [--repair]      checks every file and entry; exit status 1 on
//                              damage; --repair heals it
//   stats [D] [--zero] [--format text|json|prometheus]  entries, objects, sizes, compression, orphans,
//                              hit rate, limit
//   explain [D] [--entry P]    why lookups missed / an entry vs its nearest
//   export [D] -o FILE         the Mega-Cache bundle of a cache
//   import FILE [D]            fills a cache from a bundle
//   gc [D] [--max-size SIZE] [--older-than AGE] [--model NAME]... [--orphans]
//                              evicts by size, age or model (none: the
//                              configured limit); collects orphans
//   config --show | config KEY [VALUE]  the settings and where each comes
//                              from; max-size sets the cache's limit
//   clear [D]                  removes the cache
// Every one takes --cache-dir D as well as the positional D (the default:
// $NPUCACHE_CACHE_DIR, else the user's npucache.conf, else .npucache);
// gc, clear, verify --repair and config max-size take --dry-run (list,
// remove nothing).
#include <npucache/cache.h>
#include <npucache/error.h>

#include "admin/admin.h"
#include "log/progress.h"
#include "process/settings.h"
#include "remote/config.h"
#include "storage/metrics.h"
#include "tools/commands.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <map>
#include <optional>
#include <vector>

namespace npucache::tools {

std::string dir_or_default(const std::string& d) { return d.empty() ? default_cache_dir() : d; }

std::string CacheDirArg::given() const {
  if (!positional.empty() && !option.empty() && positional != option)
    throw ConfigError("two cache directories: " + positional + " and --cache-dir " + option + "; give one");
  return option.empty() ? positional : option;
}

std::shared_ptr<CacheDirArg> add_cache_dir(CLI::App* cmd, bool positional) {
  auto a = std::make_shared<CacheDirArg>();
  const std::string help =
      "cache directory (default: $NPUCACHE_CACHE_DIR, else cache_dir of the user's npucache.conf, "
      "else .npucache)";
  if (positional) cmd->add_option("dir", a->positional, help + "; as --cache-dir");
  cmd->add_option("--cache-dir", a->option, help);
  return a;
}

namespace {

void print_json(const nlohmann::json& j) { std::printf("%s\n", j.dump(2).c_str()); }

// A date as ModelCacheMeta writes it (local time), "-" when unknown.
std::string local_time(const std::optional<double>& t) {
  if (!t) return "-";
  const auto secs = static_cast<std::time_t>(*t);
  std::tm tm{};
  localtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

void cmd_ls(const std::string& d, const std::vector<std::string>& models, bool json) {
  const auto l = cache::admin::ls(dir_or_default(d), models);
  if (json) {
    nlohmann::json entries = nlohmann::json::array();
    for (const auto& e : l.entries)
      entries.push_back({{"path", e.path},
                         {"object", e.graph_key},
                         {"mode", e.mode},
                         {"model_class", e.model_class},
                         {"stored_bytes", e.stored_bytes},
                         {"last_used", e.last_used ? nlohmann::json(*e.last_used) : nlohmann::json(nullptr)},
                         {"last_used_local", local_time(e.last_used)}});
    print_json({{"dir", l.dir}, {"entries", entries}, {"objects", l.objects}, {"problems", l.problems}});
    return;
  }
  std::printf("%-72s %-12s %-16s %10s  %s\n", "entry", "object", "mode", "stored", "last use");
  for (const auto& e : l.entries)
    std::printf("%-72s %-12s %-16s %10zu  %s\n", e.path.c_str(), e.graph_key.substr(0, 12).c_str(), e.mode.c_str(),
                e.stored_bytes, local_time(e.last_used).c_str());
  for (const auto& p : l.problems) std::printf("not read: %s\n", p.c_str());
  std::printf("%zu entries, %zu objects in %s\n", l.entries.size(), l.objects, l.dir.c_str());
}

// `entry` is what `ls` prints (<model_info>/.../<func>, under the cache
// directory) or the seed's path ${cache_dir}/${model_info}/.../${func}.
void cmd_readable(const std::string& entry, const std::string& d, const std::string& out) {
  const std::string dir = dir_or_default(d);
  const std::filesystem::path under = std::filesystem::path(dir) / entry;
  std::string text;
  // An entry of the cache directory first when it was named, else the
  // path as given first.
  const std::vector<std::string> tries =
      !d.empty() ? std::vector<std::string>{under.string(), entry} : std::vector<std::string>{entry, under.string()};
  for (std::size_t i = 0; i < tries.size(); ++i) {
    try {
      text = readable_cache(tries[i], out);
      break;
    } catch (const CacheError& e) {
      if (i + 1 == tries.size())
        throw CacheError("no cache entry '" + entry + "': neither an entry of " + dir +
                         " (as `npucache ls` prints them) nor a path to one (" + e.what() + "); `npucache ls " + dir +
                         "` lists the entries");
    }
  }
  if (out.empty())
    std::fputs(text.c_str(), stdout);
  else
    std::printf("wrote %s\n", out.c_str());
}

void cmd_verify(const std::string& d, bool repair, bool dry_run, bool json, double wait) {
  if (dry_run && !repair) throw ConfigError("--dry-run goes with --repair: verify alone removes nothing");
  if (dry_run) repair = false;  // the check alone: what a repair would act on
  const auto v = cache::admin::verify(dir_or_default(d), repair, wait);
  if (!v.bad.empty() && !repair) set_exit_code(1);
  if (json) {
    nlohmann::json bad = nlohmann::json::array(), other = nlohmann::json::array(), stale = nlohmann::json::array();
    for (const auto& [what, why] : v.bad) bad.push_back({{"what", what}, {"problem", why}});
    for (const auto& [what, why] : v.other_format) other.push_back({{"what", what}, {"why", why}});
    for (const auto& [what, why] : v.stale) stale.push_back({{"what", what}, {"why", why}});
    print_json({{"dir", dir_or_default(d)},
                {"entries", v.entries},
                {"objects", v.objects},
                {"indexes", v.indexes},
                {"templates", v.templates},
                {"regions", v.regions},
                {"bad", bad},
                {"other_format", other},
                {"stale", stale},
                {"repaired", v.repaired},
                {"dry_run", dry_run},
                {"ok", v.bad.empty()}});
    return;
  }
  for (const auto& [what, why] : v.bad) std::printf("BAD  %s: %s\n", what.c_str(), why.c_str());
  for (const auto& [what, why] : v.other_format)
    std::printf("left %s: %s; not damage, never repaired (another npucache's, beside this one)\n", what.c_str(),
                why.c_str());
  for (const auto& [what, why] : v.stale)
    std::printf(
        "STALE %s: %s; not damage, never repaired (an earlier npucache's jobs may still use it; gc "
        "--older-than or a size limit removes it)\n",
        what.c_str(), why.c_str());
  if (dry_run) {
    for (const auto& [what, why] : v.bad) std::printf("would repair %s (removed or rewritten)\n", what.c_str());
    std::printf("dry run: nothing was changed; %zu problem(s) a repair would act on\n", v.bad.size());
    return;
  }
  for (const auto& r : v.repaired) std::printf("repaired: %s\n", r.c_str());
  std::printf(
      "%zu entries, %zu objects, %zu indexes, %zu capture templates, %zu compiled regions checked, %zu "
      "problem(s)%s%s\n",
      v.entries, v.objects, v.indexes, v.templates, v.regions, v.bad.size(),
      repair && !v.bad.empty() ? ", repaired" : "",
      v.stale.empty() ? "" : (", " + std::to_string(v.stale.size()) + " stale (an earlier format's)").c_str());
}

void cmd_stats(const std::string& d, bool zero, bool json, const std::string& format) {
  const std::string dir = dir_or_default(d);
  if (zero) {
    cache::admin::zero_stats(dir);
    std::printf("statistics of %s zeroed\n", dir.c_str());
    return;
  }
  const auto s = cache::admin::stats(dir);
  if (format == "prometheus") {
    std::fputs(storage::prometheus_text(s.counters, storage::CacheBytes{s.stored_bytes, s.raw_bytes}).c_str(), stdout);
    return;
  }
  using cache::format_size;
  const auto& c = s.counters;
  const auto lookups = c.hits + c.misses;
  // Every lookup served without compiling (any source), and those of its own entry.
  const auto warm = c.hits + c.hits_remote + c.hits_other_layout + c.hits_rank;
  const auto rate = [&](uint64_t n) {
    return lookups ? static_cast<double>(std::min(n, lookups)) / static_cast<double>(lookups) : 0.0;
  };
  const double hit_rate = rate(warm), local_hit_rate = rate(c.hits);
  if (json) {
    print_json({{"dir", dir},
                {"entries", s.entries},
                {"objects", s.objects},
                {"stored_bytes", s.stored_bytes},
                {"raw_bytes", s.raw_bytes},
                {"compression_ratio",
                 s.stored_bytes ? nlohmann::json(static_cast<double>(s.raw_bytes) / static_cast<double>(s.stored_bytes))
                                : nlohmann::json(nullptr)},
                {"orphans", s.orphans},
                {"orphan_bytes", s.orphan_bytes},
                {"later_format_objects", s.later_format_objects},
                {"orphans_kept",
                 s.collection_blocked.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.collection_blocked)},
                {"templates", s.templates},
                {"template_bytes", s.template_bytes},
                {"regions", s.regions},
                {"region_bytes", s.region_bytes},
                {"region_hits", c.region_hits},
                {"region_compiles", c.region_compiles},
                {"region_copies", c.region_copies},
                {"max_size_bytes", s.max_size ? nlohmann::json(*s.max_size) : nlohmann::json(nullptr)},
                {"hits", s.counters.hits},
                {"misses", s.counters.misses},
                {"hit_rate", hit_rate},
                {"local_hit_rate", local_hit_rate},
                {"hit_local", c.hits},
                {"hit_remote", c.hits_remote},
                {"reused_other_layout", c.hits_other_layout},
                {"received", c.hits_rank},
                {"compiled", c.compiles},
                {"misses_by_cause", c.misses_by_cause},
                {"saves", s.counters.saves},
                {"captures", s.counters.captures},
                {"restores", s.counters.restores},
                {"recaptures", s.counters.recaptures},
                {"recaptures_by_reason", s.counters.recaptures_by_reason},
                {"compile_time_saved_s", s.counters.compile_time_saved_s},
                {"remote",
                 {{"hits", s.counters.remote.hits},
                  {"misses", s.counters.remote.misses},
                  {"writes", s.counters.remote.writes},
                  {"errors", s.counters.remote.errors},
                  {"bytes_read", s.counters.remote.bytes_read},
                  {"bytes_written", s.counters.remote.bytes_written},
                  {"time_s", s.counters.remote.time_s},
                  {"shards", s.counters.remote.shards}}}});
    return;
  }
  std::printf("entries          %zu\nobjects          %zu\n", s.entries, s.objects);
  std::printf(
      "stored           %s (%zu bytes): the object files\nraw              %s (%zu bytes): the artifacts "
      "uncompressed\n",
      format_size(s.stored_bytes).c_str(), s.stored_bytes, format_size(s.raw_bytes).c_str(), s.raw_bytes);
  if (s.stored_bytes > 0)
    std::printf("compression      %.2fx (raw / stored; stored also holds each object's HDF5 view and traced graph)\n",
                static_cast<double>(s.raw_bytes) / static_cast<double>(s.stored_bytes));
  if (s.collection_blocked.empty())
    std::printf("orphans          %zu object(s), %s: used by no entry (npucache gc --orphans removes them)\n",
                s.orphans, format_size(s.orphan_bytes).c_str());
  else
    std::printf("orphans          %zu object(s), %s: used by no entry read here; gc keeps them: %s\n", s.orphans,
                format_size(s.orphan_bytes).c_str(), s.collection_blocked.c_str());
  if (s.later_format_objects > 0)
    std::printf("later format     %zu object(s) no entry here uses, of a later npucache: its gc collects them\n",
                s.later_format_objects);
  std::printf("templates        %zu (%s): captured graphs, restored by a reduce-overhead start\n", s.templates,
              format_size(s.template_bytes).c_str());
  std::printf("regions          %zu (%s): compiled regions, taken by every compile that calls them\n", s.regions,
              format_size(s.region_bytes).c_str());
  std::printf(
      "limit            %s\n",
      s.max_size
          ? (format_size(*s.max_size) + " (" +
             std::to_string(s.max_size ? 100 * s.stored_bytes / std::max<std::size_t>(*s.max_size, 1) : 0) + "% used)")
                .c_str()
          : "none (npucache config max-size SIZE sets one)");
  const auto u = [](uint64_t v) { return static_cast<unsigned long long>(v); };
  std::printf("hits             %llu: %llu hit_local, %llu hit_remote, %llu reused_other_layout, %llu received\n",
              u(warm), u(c.hits), u(c.hits_remote), u(c.hits_other_layout), u(c.hits_rank));
  std::string causes;
  for (const auto& [cause, n] : c.misses_by_cause)
    causes += (causes.empty() ? " (" : ", ") + std::to_string(n) + " " + cause;
  std::printf("misses           %llu%s%s: lookups without a usable entry of their own\n", u(c.misses), causes.c_str(),
              causes.empty() ? "" : ")");
  std::printf("compiled         %llu: misses that compiled\n", u(c.compiles));
  std::printf(
      "region hits      %llu: regions taken compiled from regions/ by compiles; %llu compiled; %llu copied in with "
      "programs from elsewhere\n",
      u(c.region_hits), u(c.region_compiles), u(c.region_copies));
  std::printf(
      "hit rate         %.1f %% (served without compiling; %.1f %% from their own entry)\nsaves            %llu\n",
      100.0 * hit_rate, 100.0 * local_hit_rate, u(c.saves));
  std::printf("compile avoided  %.3f s (the recorded compile time of each entry, summed over its hits)\n",
              s.counters.compile_time_saved_s);
  std::string recaptures;
  for (const auto& [why, n] : c.recaptures_by_reason)
    recaptures += (recaptures.empty() ? " (" : ", ") + std::to_string(n) + " " + why;
  std::printf(
      "captures         %llu recorded, %llu restored from templates, %llu recaptured%s%s\n",
      static_cast<unsigned long long>(s.counters.captures), static_cast<unsigned long long>(s.counters.restores),
      static_cast<unsigned long long>(s.counters.recaptures), recaptures.c_str(), recaptures.empty() ? "" : ")");
  const auto& r = s.counters.remote;
  if (r.empty()) return;
  std::string errors;
  for (const auto& [kind, n] : r.errors) errors += (errors.empty() ? "" : ", ") + std::to_string(n) + " " + kind;
  std::printf("remote hits      %llu\nremote misses    %llu\nremote writes    %llu\n",
              static_cast<unsigned long long>(r.hits), static_cast<unsigned long long>(r.misses),
              static_cast<unsigned long long>(r.writes));
  std::printf("remote errors    %s\n", errors.empty() ? "none" : errors.c_str());
  std::printf("remote bytes     %s read, %s written\nremote time      %.3f s\n", format_size(r.bytes_read).c_str(),
              format_size(r.bytes_written).c_str(), r.time_s);
  for (const auto& [shard, kinds] : r.shards) {
    std::string what;
    for (const auto& [kind, n] : kinds)
      what += (what.empty() ? "" : ", ") + std::to_string(n) + " " +
              (kind == "skipped" ? "skipped (its keys were misses)" : kind);
    std::printf("remote shard     %s: %s\n", shard.c_str(), what.c_str());
  }
}

// The last line of `explain`: what the findings mean, in one sentence.
std::string explain_verdict(const cache::admin::Explanation& x) {
  if (!x.entry.empty()) {
    if (x.nearest.empty() && !x.pieces.empty())
      return "the method has graph breaks: it is cached as the pieces listed, each looked up when a call reaches it";
    if (x.nearest.empty()) return "no other entry to compare with";
    if (x.differences.empty())
      return "no key component differs from " + x.nearest + ": the two entries differ only in where they sit " +
             "(method, world size, rank) and serve the same program";
    std::string names;
    for (const auto& d : x.differences) names += (names.empty() ? "" : ", ") + d.substr(0, d.find(':'));
    return std::to_string(x.differences.size()) + " key component(s) differ from the nearest entry (" + names +
           "): a lookup with this entry's settings cannot be served by that one";
  }
  if (x.misses.empty()) return "no recorded misses";
  static const std::map<std::string, std::string> kMeaning = {
      {"absent", "first run of that entry: nothing to fix"},
      {"absent, another layout",
       "an entry of the same method exists in another layout (world size, tp, pp): the nearest and what differs are "
       "listed"},
      {"absent, other settings",
       "an entry of the same method exists under other options, config or model: the differences are listed"},
      {"stale", "a format or runtime version changed: rebuilt once"},
      {"computation", "the method's code, constants or compile settings changed: rebuilt"},
      {"signature", "inputs of other shapes or dtypes than the entry was traced for"},
      {"corrupt", "damaged files, rebuilt: `npucache verify` checks the rest"},
      {"refused", "the cache directory was refused as unsafe: see the warning in the log"}};
  std::map<std::string, int> by_reason;
  for (const auto& m : x.misses)
    ++by_reason[m.reason != "absent" || m.differences.empty()           ? m.reason
                : m.differences.front().rfind("another layout", 0) == 0 ? std::string("absent, another layout")
                                                                        : std::string("absent, other settings")];
  std::string parts;
  for (const auto& [reason, n] : by_reason) {
    const auto it = kMeaning.find(reason);
    parts += (parts.empty() ? "" : "; ") + std::to_string(n) + " " + reason +
             (it == kMeaning.end() ? "" : " (" + it->second + ")");
  }
  return std::to_string(x.misses.size()) + " recent miss(es): " + parts;
}

void cmd_explain(const std::string& d, const std::string& entry, bool json) {
  const std::string dir = dir_or_default(d);
  const auto x = cache::admin::explain(dir, entry);
  const std::string verdict = explain_verdict(x);
  if (json) {
    nlohmann::json j = {{"dir", dir}, {"verdict", verdict}};
    if (!entry.empty()) {
      j["entry"] = entry;
      j["nearest"] = x.nearest.empty() ? nlohmann::json(nullptr) : nlohmann::json(x.nearest);
      j["differences"] = x.differences;
      j["pieces"] = x.pieces;
      j["dynamic_dims"] = x.dynamic_dims;
      j["regions"] = x.regions;
    } else {
      nlohmann::json misses = nlohmann::json::array();
      for (const auto& m : x.misses)
        misses.push_back({{"time", m.time},
                          {"entry", m.entry},
                          {"reason", m.reason},
                          {"differences", m.differences},
                          {"job", m.job}});
      j["misses"] = misses;
      j["job"] = x.job;
      j["earlier_jobs"] = x.earlier_jobs;
    }
    print_json(j);
    return;
  }
  if (!entry.empty()) {
    if (!x.nearest.empty()) {
      std::printf("%s vs nearest entry %s:\n", entry.c_str(), x.nearest.c_str());
      for (const auto& diff : x.differences) std::printf("  %s\n", diff.c_str());
    }
    if (!x.pieces.empty()) {
      std::printf("graph breaks: %s is split into %zu cached piece(s) (compiled with fullgraph=false):\n",
                  entry.c_str(), x.pieces.size());
      for (const auto& p : x.pieces) std::printf("  %s\n", p.c_str());
    }
    if (!x.dynamic_dims.empty()) {
      std::printf("dynamic dims (automatic dynamic, kept in profiles.h5):\n");
      for (const auto& dim : x.dynamic_dims) std::printf("  %s\n", dim.c_str());
    }
    if (!x.regions.empty()) {
      std::printf("compile regions (compiled once, in regions/, for every depth, layout and process):\n");
      for (const auto& r : x.regions) std::printf("  %s\n", r.c_str());
    }
  } else {
    if (!x.misses.empty())
      std::printf("misses of the last job%s%s:\n", x.job.empty() ? "" : (" " + x.job).c_str(),
                  x.earlier_jobs == 0
                      ? ""
                      : (" (" + std::to_string(x.earlier_jobs) + " earlier job(s) in stats.json)").c_str());
    for (const auto& m : x.misses) {
      std::printf("miss %s (%s)\n", m.entry.c_str(), m.reason.c_str());
      for (const auto& diff : m.differences) std::printf("  %s\n", diff.c_str());
    }
  }
  std::printf("verdict: %s\n", verdict.c_str());
}

void cmd_export(const std::string& d, const std::string& out, double wait) {
  const auto t = [&] {
    const log::Progress progress("exporting " + dir_or_default(d));
    return cache::admin::export_bundle(dir_or_default(d), out, wait);
  }();
  std::printf(
      "exported %zu entries, %zu objects, %zu capture templates, %zu tuning decisions, %zu dynamic-shape dims (%zu "
      "bytes) to %s\n",
      t.entries, t.objects, t.templates, t.tuning, t.profile_dims, t.bytes, out.c_str());
}

void cmd_import(const std::string& file, const std::string& d) {
  const std::string dir = dir_or_default(d);
  const auto t = [&] {
    const log::Progress progress("importing " + file);
    return cache::admin::import_bundle(file, dir);
  }();
  std::printf(
      "imported %zu entries, %zu objects, %zu capture templates, %zu new tuning decisions, %zu new dynamic-shape dims, "
      "%zu new compiled regions into %s",
      t.entries, t.objects, t.templates, t.tuning, t.profile_dims, t.regions, dir.c_str());
  if (t.kept_later) std::printf("; kept %zu entries the cache saved after the bundle's", t.kept_later);
  std::printf("\n");
}

struct GcArgs {
  std::string max_size, older_than;
  bool has_max_size = false, has_older_than = false;  // given, even as '' (an error then)
  std::vector<std::string> models;
  bool orphans = false;
};

// The lines of a gc: what it evicted (or, in a dry run, would evict).
void print_gc(const cache::GcResult& g, bool limited, bool dry_run) {
  using cache::format_size;
  const char* verb = dry_run ? "would evict" : "evicted";
  for (const auto& e : g.evicted) std::printf("%s %s\n", verb, e.c_str());
  for (const auto& o : g.removed) std::printf("%s %s\n", dry_run ? "would remove" : "removed", o.c_str());
  for (const auto& e : g.in_use) std::printf("kept %s (older, but a running process uses it)\n", e.c_str());
  if (!g.in_use.empty())
    std::printf("gc: kept %zu entr(ies) older than the age given: %zu running process(es) use entries of this cache\n",
                g.in_use.size(), g.live_processes);
  std::printf(
      "gc: %s %zu of %zu entries (%zu layout(s)), %s %zu object(s)%s; %s "
      "of objects remain%s\n",
      verb, g.evicted_entries, g.entries, g.evicted_layouts, dry_run ? "would remove" : "removed", g.removed_objects,
      dry_run ? "" : (" and " + std::to_string(g.removed_templates) + " capture template(s)").c_str(),
      format_size(g.remaining_bytes).c_str(), limited ? (" (limit " + format_size(g.limit) + ")").c_str() : "");
  if (g.removed_regions > 0 || g.region_bytes > 0)
    std::printf("gc: %s %zu compiled region(s); %s of compiled regions remain\n", dry_run ? "would remove" : "removed",
                g.removed_regions, format_size(g.region_bytes).c_str());
  std::printf("gc: %zu orphaned object(s) (%s) %s: objects no entry used\n", g.orphaned_objects,
              format_size(g.orphaned_bytes).c_str(), dry_run ? "would be collected" : "collected");
  for (const auto& p : g.problems) std::printf("skipped %s\n", p.c_str());
  if (!g.blocked.empty()) std::printf("gc: %s\n", g.blocked.c_str());
  for (const auto& f : g.left) std::printf("left %s\n", f.c_str());
  if (dry_run) std::printf("dry run: nothing was removed\n");
}

// print_gc, and the command's exit status 1 when the gc was blocked (no
// object collected, no entry evicted to fit: said in its lines).
void print_gc_status(const cache::GcResult& g, bool limited, bool dry_run) {
  print_gc(g, limited, dry_run);
  if (!g.blocked.empty()) set_exit_code(1);
}

void cmd_gc(const std::string& d, const GcArgs& a, bool dry_run, double wait) {
  const std::string dir = dir_or_default(d);
  cache::GcOptions o;
  if (a.has_max_size) o.max_size = cache::parse_size(a.max_size);
  if (a.has_older_than) o.older_than_s = cache::parse_age(a.older_than);
  o.models = a.models;
  o.wait_s = wait;
  o.dry_run = dry_run;
  if (!a.has_max_size && !a.has_older_than && a.models.empty() && !a.orphans) {
    // As ccache's cleanup: the configured limit.
    std::string source;
    o.max_size = cache::max_size_or_warn(dir, &source);  // a bad setting: a warning, the orphans collected
    if (o.max_size)
      std::printf("gc: applying max_size %s (from %s)\n", cache::format_size(*o.max_size).c_str(), source.c_str());
    else
      std::printf(
          "gc: no size limit is configured (npucache config max-size SIZE sets one): only orphaned objects are "
          "collected\n");
  }
  print_gc_status(cache::gc(dir, o), o.max_size.has_value(), dry_run);
}

// A setting's value as printed: the remote's URLs with their passwords
// hidden (remote::shown_url), as every message shows them.
std::string shown_setting(const std::string& key, const std::string& value) {
  return key == "remote" ? remote::shown_remote(value) : value;
}

// `config --show`: every setting, its value and where it came from.
void cmd_config_show(const std::string& given_dir) {
  std::vector<process::Setting> all;
  for (const auto& info : process::setting_infos()) {
    if (std::string(info.key) == "max_size") continue;
    all.push_back(process::setting(info.key));
  }
  if (!given_dir.empty()) all[0] = {"cache_dir", given_dir, "command line --cache-dir"};
  all[0].value = std::filesystem::absolute(all[0].value).string();  // as the commands use it
  const std::string dir = all[0].value;
  std::string source;
  const auto limit = cache::max_size(dir, &source);
  all.push_back({"max_size", limit ? process::size_setting_text(*limit) : "none", source});
  std::printf(
      "# user configuration file: %s%s\n# cache configuration file: %s%s\n", process::user_config_path().c_str(),
      std::filesystem::exists(process::user_config_path()) ? "" : " (absent)", process::cache_config_path(dir).c_str(),
      std::filesystem::exists(process::cache_config_path(dir)) ? "" : " (absent)");
  for (const auto& s : all)
    std::printf("(%s) %s =%s%s\n", s.source.c_str(), s.key.c_str(), s.value.empty() ? "" : " ",
                shown_setting(s.key, s.value).c_str());
}

void cmd_config(const std::string& d, const std::string& key, const std::string& value, bool show, bool dry_run) {
  if (show) {
    if (!key.empty()) throw ConfigError("config --show takes no setting: it prints them all");
    cmd_config_show(d);
    return;
  }
  if (key.empty()) throw ConfigError("config needs a setting (e.g. config max-size 5G) or --show (every setting)");
  const std::string dir = dir_or_default(d);
  const process::SettingInfo* info = process::find_setting(key);
  if (!info) {
    std::string keys;
    for (const auto& i : process::setting_infos()) keys += (keys.empty() ? "" : ", ") + std::string(i.key);
    throw ConfigError("unknown setting '" + key + "'; the settings are: " + keys);
  }
  if (std::string(info->key) != "max_size") {
    if (!value.empty())
      throw ConfigError(std::string(info->key) + " is not a setting of one cache: set it in " +
                        process::user_config_path() + " (`" + info->key + " = VALUE`) or with " + info->env);
    const auto s = process::setting(info->key);
    std::printf("%s %s\n", s.key.c_str(), s.value.empty() ? "none" : shown_setting(s.key, s.value).c_str());
    return;
  }
  if (value.empty()) {
    auto m = cache::max_size(dir);
    std::printf("max-size %s\n", m ? cache::format_size(*m).c_str() : "none");
    return;
  }
  std::optional<std::size_t> limit;
  if (value != "none") limit = cache::parse_size(value);
  if (dry_run && !limit) throw ConfigError("config max-size none --dry-run: removing the limit removes nothing");
  // As ccache's CCACHE_MAXSIZE: the environment overrides the cache's file,
  // so the limit in effect is the environment's.
  std::optional<std::size_t> effective = limit;
  if (const char* env = std::getenv(info->env); env && *env) {
    effective = cache::max_size(dir);
    std::fprintf(stderr,
                 "npucache: warning: %s=%s overrides the max_size of %s: the limit in effect is %s, not %s; unset "
                 "%s for the cache's own to apply\n",
                 info->env, env, process::cache_config_path(dir).c_str(),
                 effective ? cache::format_size(*effective).c_str() : "none",
                 limit ? cache::format_size(*limit).c_str() : "none", info->env);
  }
  if (dry_run) {  // what the limit would evict; nothing written
    if (!effective) {
      std::printf("gc: no size limit is in effect: nothing would be evicted\ndry run: nothing was removed\n");
      return;
    }
    cache::GcOptions o;
    o.max_size = effective;
    o.dry_run = true;
    print_gc_status(cache::gc(dir, o), true, true);
    return;
  }
  cache::set_max_size(dir, limit);
  std::printf("max-size %s for %s (in %s)\n", limit ? cache::format_size(*limit).c_str() : "none", dir.c_str(),
              process::cache_config_path(dir).c_str());
  if (!effective) return;
  // The limit in effect applies now, as a gc would (what it removes is listed).
  cache::GcOptions o;
  o.max_size = effective;
  print_gc_status(cache::gc(dir, o), true, false);
}

void cmd_clear(const std::string& d, bool dry_run, double wait) {
  const std::string dir = dir_or_default(d);
  const auto c = cache::admin::clear(dir, wait, dry_run);
  for (const auto& f : c.left) std::printf("left %s: not npucache's\n", f.c_str());
  for (const auto& f : c.in_use) std::printf("left %s: a running process holds it\n", f.c_str());
  if (!c.had_cache) {
    std::printf("no npucache cache in %s; nothing removed\n", dir.c_str());
    return;
  }
  if (dry_run) {
    for (const auto& f : c.files) std::printf("would remove %s\n", f.c_str());
    std::printf("dry run: nothing was removed from %s (%zu files would be)\n", dir.c_str(), c.removed);
    return;
  }
  std::printf("cleared %s (%zu files)\n", dir.c_str(), c.removed);
}

}  // namespace

void add_cache_commands(CLI::App& app) {
  auto arg = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto entry = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto dry_run = std::make_shared<bool>(false);
  auto models = std::make_shared<std::vector<std::string>>();
  // How long a command beside running jobs waits for the store lock.
  auto wait = std::make_shared<double>(cache::kAdminWaitSeconds);
  const auto add_wait = [&](CLI::App* c) {
    c->add_option("--wait", *wait,
                  "seconds to wait for the cache's lock while jobs save to it or another gc, repair or clear "
                  "runs; then the command stops, having changed nothing")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
  };
  const auto add_dry_run = [&](CLI::App* c, const std::string& what) {
    c->add_flag("--dry-run", *dry_run, "print what " + what + " would remove, and remove nothing");
  };

  auto* ls = app.add_subcommand("ls", "list the entries of a cache, with their last use");
  const auto ls_dir = add_cache_dir(ls);
  ls->add_option("--model", *models,
                 "only the entries of this model (repeatable), named as gc's --model names it: its class "
                 "(npucache.models.Decoder) or one model_info");
  ls->add_flag("--json", *json, "print JSON");
  ls->callback([=] { cmd_ls(ls_dir->given(), *models, *json); });

  auto* readable = app.add_subcommand("readable", "print a cached entry as readable text");
  readable
      ->add_option("entry", *arg,
                   "an entry as `npucache ls` prints it (<model_info>/.../<func>), or its path "
                   "${cache_dir}/${model_info}/.../${func}")
      ->required();
  const auto readable_dir = add_cache_dir(readable, false);
  readable->add_option("-o,--output", *out, "write to this file");
  readable->callback([=] { cmd_readable(*arg, readable_dir->given(), *out); });

  auto repair = std::make_shared<bool>(false);
  auto* verify = app.add_subcommand("verify", "check every file and entry; exit status 1 when one is damaged");
  const auto verify_dir = add_cache_dir(verify);
  verify->add_flag("--repair", *repair, "remove damaged objects and entries, rewrite damaged indexes");
  add_dry_run(verify, "--repair");
  verify->add_flag("--json", *json, "print JSON");
  add_wait(verify);
  verify->callback([=] { cmd_verify(verify_dir->given(), *repair, *dry_run, *json, *wait); });

  auto zero = std::make_shared<bool>(false);
  auto* stats = app.add_subcommand("stats", "entries, objects, sizes, hit rate, limit, compile time avoided");
  const auto stats_dir = add_cache_dir(stats);
  stats->add_flag("--zero,-z", *zero, "zero the counters");
  stats->add_flag("--json", *json, "print JSON");
  auto format = std::make_shared<std::string>("text");
  stats->add_option("--format", *format, "text, json or prometheus (the text exposition format, for node_exporter)")
      ->check(CLI::IsMember({"text", "json", "prometheus"}));
  stats->callback([=] { cmd_stats(stats_dir->given(), *zero, *json || *format == "json", *format); });

  auto* explain = app.add_subcommand("explain", "which key components made lookups miss");
  const auto explain_dir = add_cache_dir(explain);
  explain->add_option("--entry", *entry, "compare this entry with its nearest neighbour");
  explain->add_flag("--json", *json, "print JSON");
  explain->callback([=] { cmd_explain(explain_dir->given(), *entry, *json); });

  auto* exp = app.add_subcommand("export", "write a cache as a Mega-Cache bundle");
  const auto export_dir = add_cache_dir(exp);
  exp->add_option("-o,--output", *out, "bundle file")->required();
  add_wait(exp);
  exp->callback([=] { cmd_export(export_dir->given(), *out, *wait); });

  auto* imp = app.add_subcommand("import", "fill a cache from a bundle");
  imp->add_option("file", *arg, "bundle file")->required();
  const auto import_dir = add_cache_dir(imp);
  imp->callback([=] { cmd_import(*arg, import_dir->given()); });

  auto gc_args = std::make_shared<GcArgs>();
  auto* gc = app.add_subcommand("gc",
                                "evict entries (by size, age or model; with none of them: down to the configured "
                                "max_size) and collect orphaned objects (objects no entry uses)");
  const auto gc_dir = add_cache_dir(gc);
  auto* max_size = gc->add_option("--max-size", gc_args->max_size,
                                  "evict least recently used layouts until the stored objects fit this size, e.g. 64M");
  auto* older_than =
      gc->add_option("--older-than", gc_args->older_than,
                     "evict entries not saved or served for this long: a number with s, m, h, d or w, e.g. 7d");
  gc->add_option("--model", gc_args->models,
                 "evict every entry of a model (repeatable): its class as ls's model_info begins "
                 "(npucache.models.Decoder: every pipeline stage's index) or one model_info");
  gc->add_flag("--orphans", gc_args->orphans, "only collect orphaned objects (every gc does; this one evicts nothing)");
  add_dry_run(gc, "gc");
  add_wait(gc);
  gc->callback([=] {
    gc_args->has_max_size = max_size->count() > 0;
    gc_args->has_older_than = older_than->count() > 0;
    cmd_gc(gc_dir->given(), *gc_args, *dry_run, *wait);
  });

  auto key = std::make_shared<std::string>();
  auto value = std::make_shared<std::string>();
  auto show = std::make_shared<bool>(false);
  auto* config = app.add_subcommand(
      "config", "show the settings (--show: each with where it came from) or set the cache's max-size [SIZE|none]");
  config->add_option("key", *key, "a setting: max-size (of the cache), cache-dir, remote, log-level, log-file");
  config->add_option("value", *value, "for max-size: a size (64M, 5G) or none; omitted: show the setting");
  config->add_flag("--show", *show, "print every setting, its value and where it came from");
  add_dry_run(config, "max-size SIZE");
  const auto config_dir = add_cache_dir(config, false);
  config->callback([=] { cmd_config(config_dir->given(), *key, *value, *show, *dry_run); });

  auto* clear = app.add_subcommand("clear", "remove a cache");
  const auto clear_dir = add_cache_dir(clear);
  add_dry_run(clear, "clear");
  add_wait(clear);
  clear->callback([=] { cmd_clear(clear_dir->given(), *dry_run, *wait); });
}

}  // namespace npucache::tools
