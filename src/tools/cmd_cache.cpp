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

#include "cache/artifact.h"
#include "cache/bundle.h"
#include "cache/keys.h"
#include "cache/readable.h"
#include "cache/stats.h"
#include "cache/store.h"
#include "tools/commands.h"
#include "tools/progress.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace npucache::tools {
namespace {

std::string dir_or_default(const std::string& d) { return d.empty() ? default_cache_dir() : d; }

cache::Hdf5Store::Reader open_reader(const cache::Hdf5Store& store) {
  auto r = store.reader();
  if (!r) throw CacheError("no cache in " + store.dir().string() + " (no cache.h5)");
  return std::move(*r);
}

std::size_t parse_size(const std::string& s) {
  std::size_t pos = 0;
  double v = std::stod(s, &pos);
  std::string unit = s.substr(pos);
  std::transform(unit.begin(), unit.end(), unit.begin(), ::toupper);
  double mult = unit.empty() || unit == "B" ? 1 : unit == "K" || unit == "KB" ? 1024.0
                : unit == "M" || unit == "MB" ? 1024.0 * 1024 : unit == "G" || unit == "GB" ? 1024.0 * 1024 * 1024 : -1;
  if (mult < 0 || v < 0) throw ConfigError("size '" + s + "' is not a size; use bytes or K/M/G, e.g. 64M");
  return static_cast<std::size_t>(v * mult);
}

void cmd_ls(const std::string& d) {
  cache::Hdf5Store store(dir_or_default(d));
  auto r = open_reader(store);
  auto entries = r.entries();
  std::printf("%-72s %-12s %-16s %10s\n", "entry", "object", "mode", "stored");
  for (const auto& e : entries) {
    std::printf("%-72s %-12s %-16s %10zu\n", e.path.c_str(), e.graph_key.substr(0, 12).c_str(),
                e.attrs.count("mode") ? e.attrs.at("mode").c_str() : "?", r.stored_bytes(e.graph_key));
  }
  std::printf("%zu entries, %zu objects in %s\n", entries.size(), r.objects().size(), store.file().c_str());
}

void cmd_readable(const std::string& path, const std::string& out) {
  std::string text = readable_cache(path, out);
  if (out.empty()) std::fputs(text.c_str(), stdout);
  else std::printf("wrote %s\n", out.c_str());
}

void cmd_verify(const std::string& d) {
  cache::Hdf5Store store(dir_or_default(d));
  auto r = open_reader(store);
  auto entries = r.entries();
  int bad = 0;
  Progress progress("verify", entries.size());
  for (const auto& e : entries) {
    try {
      cache::ObjectRecord o = r.object(e.graph_key);  // checksum
      bool has_program = false;
      cache::load_object(o, e.parameters, &has_program);  // decodes
      if (e.attrs.count("checksum") && e.attrs.at("checksum") != cache::checksum(o.raw))
        throw CacheError("entry checksum differs from its object's");
    } catch (const Error& ex) {
      ++bad;
      std::printf("BAD  %s: %s\n", e.path.c_str(), ex.what());
    }
    progress.step();
  }
  progress.done();
  std::printf("%zu entries checked, %d bad\n", entries.size(), bad);
  if (bad) set_exit_code(1);
}

void cmd_stats(const std::string& d) {
  cache::Hdf5Store store(dir_or_default(d));
  auto r = open_reader(store);
  std::size_t stored = 0, raw = 0;
  auto objects = r.objects();
  for (const auto& k : objects) {
    stored += r.stored_bytes(k);
    raw += r.object(k).raw.size();
  }
  cache::CacheStats s = cache::read_stats(store.dir());
  std::printf("entries          %zu\nobjects          %zu\nbytes stored     %zu\nbytes raw        %zu\n",
              r.entries().size(), objects.size(), stored, raw);
  std::printf("compression      %.2fx\n", stored ? static_cast<double>(raw) / static_cast<double>(stored) : 0.0);
  std::printf("hits             %llu\nmisses           %llu\nsaves            %llu\n",
              static_cast<unsigned long long>(s.hits), static_cast<unsigned long long>(s.misses),
              static_cast<unsigned long long>(s.saves));
}

// Components of an entry: every attribute the lookup key covers.
cache::Components components(const cache::EntryRecord& e) {
  static const std::set<std::string> keys = {"model_class", "parameter_signature", "method", "config", "mode",
                                             "dynamic", "ge_cache", "decompositions", "runtime_version",
                                             "format_version", "code_fingerprint"};
  cache::Components c;
  for (const auto& [k, v] : e.attrs)
    if (keys.count(k)) c[k] = v;
  return c;
}

void cmd_explain(const std::string& d, const std::string& entry) {
  cache::Hdf5Store store(dir_or_default(d));
  if (!entry.empty()) {
    auto r = open_reader(store);
    auto target = r.entry(entry);
    if (!target) throw CacheError("no entry '" + entry + "'; `npucache ls` lists them");
    const cache::EntryRecord* nearest = nullptr;
    std::size_t best = SIZE_MAX;
    auto all = r.entries();
    for (const auto& e : all) {
      if (e.path == target->path) continue;
      std::size_t n = cache::differing_components(components(e), components(*target)).size();
      if (n < best) {
        best = n;
        nearest = &e;
      }
    }
    if (!nearest) {
      std::printf("%s is the only entry\n", entry.c_str());
      return;
    }
    std::printf("%s vs nearest entry %s:\n", entry.c_str(), nearest->path.c_str());
    for (const auto& diff : cache::differing_components(components(*nearest), components(*target)))
      std::printf("  %s\n", diff.c_str());
    return;
  }
  cache::CacheStats s = cache::read_stats(store.dir());
  if (s.recent_misses.empty()) {
    std::printf("no recorded misses in %s\n", store.dir().c_str());
    return;
  }
  for (const auto& m : s.recent_misses) {
    std::printf("miss %s (%s)\n", m.entry.c_str(), m.reason.c_str());
    for (const auto& diff : m.differences) std::printf("  %s\n", diff.c_str());
  }
}

void cmd_export(const std::string& d, const std::string& out) {
  cache::Hdf5Store store(dir_or_default(d));
  auto r = open_reader(store);
  cache::Bundle b;
  b.entries = r.entries();
  Progress progress("export", r.objects().size());
  for (const auto& k : r.objects()) {
    b.objects.push_back(r.object(k));
    progress.step();
  }
  progress.done();
  std::string bytes = cache::write_bundle(b);
  std::ofstream f(out, std::ios::binary);
  if (!f) throw CacheError("cannot write " + out);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  std::printf("exported %zu entries, %zu objects (%zu bytes) to %s\n", b.entries.size(), b.objects.size(), bytes.size(),
              out.c_str());
}

void cmd_import(const std::string& file, const std::string& d) {
  std::ifstream f(file, std::ios::binary);
  if (!f) throw CacheError("cannot read " + file);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string dir = dir_or_default(d);
  load_cache_artifacts(ss.str(), dir);
  cache::Bundle b = cache::read_bundle(ss.str());
  std::printf("imported %zu entries, %zu objects into %s\n", b.entries.size(), b.objects.size(), dir.c_str());
}

void cmd_gc(const std::string& d, const std::string& max_size) {
  const std::size_t limit = parse_size(max_size);
  cache::Hdf5Store store(dir_or_default(d));
  auto r = open_reader(store);
  auto entries = r.entries();
  cache::CacheStats s = cache::read_stats(store.dir());
  auto last_used = [&](const cache::EntryRecord& e) {
    auto it = s.last_used.find(e.path);
    return it != s.last_used.end() ? it->second : 0.0;  // never used: evicted first
  };
  std::sort(entries.begin(), entries.end(), [&](const auto& a, const auto& b) { return last_used(a) < last_used(b); });
  std::map<std::string, int> refs;
  std::map<std::string, std::size_t> size;
  std::size_t total = 0;
  for (const auto& e : entries) {
    if (refs[e.graph_key]++ == 0) {
      size[e.graph_key] = r.stored_bytes(e.graph_key);
      total += size[e.graph_key];
    }
  }
  cache::Hdf5Store::Transaction t;
  t.drop_unreferenced_objects = true;
  for (const auto& e : entries) {
    if (total <= limit) break;
    t.remove_entries.push_back(e.path);
    if (--refs[e.graph_key] == 0) total -= size[e.graph_key];
  }
  store.commit(t);
  cache::forget_entries(store.dir(), t.remove_entries);
  std::printf("gc: evicted %zu of %zu entries; %zu bytes of objects remain (limit %zu)\n", t.remove_entries.size(),
              entries.size(), total, limit);
}

void cmd_clear(const std::string& d) {
  cache::Hdf5Store store(dir_or_default(d));
  store.clear();
  std::error_code ec;
  std::filesystem::remove(store.dir() / "stats.json", ec);
  std::printf("cleared %s\n", store.dir().c_str());
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
