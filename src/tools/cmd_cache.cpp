// The cache inspection and management commands:
//   ls [D]                     entries with their object, mode and sizes
//   readable PATH [-o FILE]    readable text of one entry
//   verify [D]                 checks every entry; exit status 1 on a bad one
//   stats [D]                  entries, objects, bytes stored vs raw, counters
//   explain [D] [--entry P]    why lookups missed / an entry vs its nearest
//   export D -o FILE           the Mega-Cache bundle of a cache
//   import FILE [D]            fills a cache from a bundle
//   gc [D] --max-size SIZE     evicts least recently used entries
//   clear [D]                  removes the cache
// D defaults to $NPUCACHE_CACHE_DIR or .npucache.
#include <npucache/cache.h>
#include <npucache/error.h>

#include "cache/admin.h"
#include "tools/commands.h"

#include <cstdio>

namespace npucache::tools {
namespace {

std::string dir_or_default(const std::string& d) { return d.empty() ? default_cache_dir() : d; }

void cmd_ls(const std::string& d) {
  const auto l = cache::admin::ls(dir_or_default(d));
  std::printf("%-72s %-12s %-16s %10s\n", "entry", "object", "mode", "stored");
  for (const auto& e : l.entries)
    std::printf("%-72s %-12s %-16s %10zu\n", e.path.c_str(), e.graph_key.substr(0, 12).c_str(), e.mode.c_str(),
                e.stored_bytes);
  std::printf("%zu entries, %zu objects in %s\n", l.entries.size(), l.objects, l.file.c_str());
}

void cmd_readable(const std::string& path, const std::string& out) {
  std::string text = readable_cache(path, out);
  if (out.empty()) std::fputs(text.c_str(), stdout);
  else std::printf("wrote %s\n", out.c_str());
}

void cmd_verify(const std::string& d) {
  const auto v = cache::admin::verify(dir_or_default(d));
  for (const auto& [path, what] : v.bad) std::printf("BAD  %s: %s\n", path.c_str(), what.c_str());
  std::printf("%zu entries checked, %zu bad\n", v.checked, v.bad.size());
  if (!v.bad.empty()) set_exit_code(1);
}

void cmd_stats(const std::string& d) {
  const auto s = cache::admin::stats(dir_or_default(d));
  std::printf("entries          %zu\nobjects          %zu\nbytes stored     %zu\nbytes raw        %zu\n", s.entries,
              s.objects, s.stored_bytes, s.raw_bytes);
  std::printf("compression      %.2fx\n",
              s.stored_bytes ? static_cast<double>(s.raw_bytes) / static_cast<double>(s.stored_bytes) : 0.0);
  std::printf("hits             %llu\nmisses           %llu\nsaves            %llu\n",
              static_cast<unsigned long long>(s.counters.hits), static_cast<unsigned long long>(s.counters.misses),
              static_cast<unsigned long long>(s.counters.saves));
}

void cmd_explain(const std::string& d, const std::string& entry) {
  const std::string dir = dir_or_default(d);
  const auto x = cache::admin::explain(dir, entry);
  if (!entry.empty()) {
    if (x.nearest.empty()) {
      std::printf("%s is the only entry\n", entry.c_str());
      return;
    }
    std::printf("%s vs nearest entry %s:\n", entry.c_str(), x.nearest.c_str());
    for (const auto& diff : x.differences) std::printf("  %s\n", diff.c_str());
    return;
  }
  if (x.misses.empty()) {
    std::printf("no recorded misses in %s\n", dir.c_str());
    return;
  }
  for (const auto& m : x.misses) {
    std::printf("miss %s (%s)\n", m.entry.c_str(), m.reason.c_str());
    for (const auto& diff : m.differences) std::printf("  %s\n", diff.c_str());
  }
}

void cmd_export(const std::string& d, const std::string& out) {
  const auto t = cache::admin::export_bundle(dir_or_default(d), out);
  std::printf("exported %zu entries, %zu objects (%zu bytes) to %s\n", t.entries, t.objects, t.bytes, out.c_str());
}

void cmd_import(const std::string& file, const std::string& d) {
  const std::string dir = dir_or_default(d);
  const auto t = cache::admin::import_bundle(file, dir);
  std::printf("imported %zu entries, %zu objects into %s\n", t.entries, t.objects, dir.c_str());
}

void cmd_gc(const std::string& d, const std::string& max_size) {
  const auto g = cache::admin::gc(dir_or_default(d), cache::admin::parse_size(max_size));
  std::printf("gc: evicted %zu of %zu entries; %zu bytes of objects remain (limit %zu)\n", g.evicted, g.entries,
              g.remaining_bytes, g.limit);
}

void cmd_clear(const std::string& d) {
  const std::string dir = dir_or_default(d);
  cache::admin::clear(dir);
  std::printf("cleared %s\n", dir.c_str());
}

}  // namespace

void add_cache_commands(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  auto arg = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto entry = std::make_shared<std::string>();
  auto size = std::make_shared<std::string>();

  auto* ls = app.add_subcommand("ls", "list the entries of a cache");
  ls->add_option("dir", *dir, "cache directory");
  ls->callback([=] { cmd_ls(*dir); });

  auto* readable = app.add_subcommand("readable", "print a cached entry as readable text");
  readable->add_option("path", *arg, "${cache_dir}/${model_info}/.../${func}")->required();
  readable->add_option("-o,--output", *out, "write to this file");
  readable->callback([=] { cmd_readable(*arg, *out); });

  auto* verify = app.add_subcommand("verify", "check every entry; exit status 1 when one is bad");
  verify->add_option("dir", *dir, "cache directory");
  verify->callback([=] { cmd_verify(*dir); });

  auto* stats = app.add_subcommand("stats", "entries, bytes stored vs raw, hit/miss counters");
  stats->add_option("dir", *dir, "cache directory");
  stats->callback([=] { cmd_stats(*dir); });

  auto* explain = app.add_subcommand("explain", "which key components made lookups miss");
  explain->add_option("dir", *dir, "cache directory");
  explain->add_option("--entry", *entry, "compare this entry with its nearest neighbour");
  explain->callback([=] { cmd_explain(*dir, *entry); });

  auto* exp = app.add_subcommand("export", "write a cache as a Mega-Cache bundle");
  exp->add_option("dir", *dir, "cache directory")->required();
  exp->add_option("-o,--output", *out, "bundle file")->required();
  exp->callback([=] { cmd_export(*dir, *out); });

  auto* imp = app.add_subcommand("import", "fill a cache from a bundle");
  imp->add_option("file", *arg, "bundle file")->required();
  imp->add_option("dir", *dir, "cache directory");
  imp->callback([=] { cmd_import(*arg, *dir); });

  auto* gc = app.add_subcommand("gc", "evict least recently used entries down to a size");
  gc->add_option("dir", *dir, "cache directory");
  gc->add_option("--max-size", *size, "size limit of stored objects, e.g. 64M")->required();
  gc->callback([=] { cmd_gc(*dir, *size); });

  auto* clear = app.add_subcommand("clear", "remove a cache");
  clear->add_option("dir", *dir, "cache directory");
  clear->callback([=] { cmd_clear(*dir); });
}

}  // namespace npucache::tools
