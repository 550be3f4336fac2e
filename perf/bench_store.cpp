// Store write and read cost against the size of the cache (docs/FORMAT.md):
// caches of 10, 100 and 1,000 entries holding at least 100 MB of objects,
// each measured side by side in one run (the sizes interleaved per trial).
//
//   commit   one new 1 MiB object and its entry (what a rank's save does:
//            the object file published, the model's index rewritten under
//            its lock), into a model of 8 entries; the rest of the cache is
//            other models. Expected flat in cache size.
//   commit*  the same into a model whose index holds every entry of the
//            cache (one model with 10, 100, 1,000 entries): grows with that
//            model's index only.
//   load     a warm read of that entry: the index record, the object file
//            with every checksum, the artifact bytes decompressed.
//   floor    the least any load does: read the object file, xxh3 over the
//            artifact, zstd-decompress it.
//
//   bench_store [--dir D] [--trials N] [--total-mb M]
#include "format/names.h"
#include "harness.h"
#include "storage/store.h"
#include "zstd/zstd_codec.h"

#include <xxhash.h>
#include <zstd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

using namespace npucache;
namespace fs = std::filesystem;

namespace {

std::string key_of(uint64_t seed) {
  char buf[33];
  std::mt19937_64 r(seed);
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(r()),
                static_cast<unsigned long long>(r()));
  return buf;
}

// Artifact-like bytes: compressible about 3:1, never trivially.
std::string payload(std::size_t bytes, uint64_t seed) {
  std::mt19937_64 r(seed);
  std::string s(bytes, '\0');
  for (std::size_t i = 0; i + 8 <= bytes; i += 8) {
    const uint64_t v = r() & 0x0707070707070707ull;
    std::memcpy(s.data() + i, &v, 8);
  }
  return s;
}

storage::EntryRecord entry_for(const std::string& model, const std::string& func, const storage::ObjectRecord& o) {
  storage::EntryRecord e;
  e.path = model + "/" + func;
  e.graph_key = o.graph_key;
  e.meta.name = "Model." + func + "(x)";
  e.meta.model_info = model;
  e.meta.components["runtime_version"] = "bench";
  e.parameters = {"layer.weight", "layer.bias"};
  e.object_checksum = o.meta.checksum;
  return e;
}

storage::ObjectRecord object_of(uint64_t seed, std::size_t bytes) {
  storage::ObjectRecord o;
  o.graph_key = key_of(seed);
  o.raw = payload(bytes, seed);
  o.graph_text = {"graph " + o.graph_key};
  o.meta.raw_size = o.raw.size();
  o.meta.checksum = storage::checksum(o.raw);  // made with the record, as make_object does
  return o;
}

struct Cache {
  fs::path dir;
  int entries = 0;
  bool one_model = false;  // every entry in one model's index
  std::size_t bytes = 0;   // object bytes stored
};

// A cache of `n` entries with `total` object bytes: models of 8 entries,
// or one model holding them all.
Cache build(const fs::path& dir, int n, std::size_t total, bool one_model) {
  Cache c{dir, n, one_model, 0};
  fs::remove_all(dir);
  const storage::Store s = storage::Store::open(dir.string(), storage::Create::yes);
  const std::size_t each = total / static_cast<std::size_t>(n) + 1;
  std::vector<storage::EntryRecord> pending;
  std::string model;
  for (int i = 0; i < n; ++i) {
    storage::ObjectRecord o = object_of(static_cast<uint64_t>(n) * 1000003 + static_cast<uint64_t>(i), each);
    o.meta.checksum = s.put_object(o, s.writing()).stored.meta.checksum;
    c.bytes += o.raw.size();
    const std::string m = one_model ? "Big_dynamic_0000000000000000" : "Model" + std::to_string(i / 8) + "_dynamic_0";
    if (!pending.empty() && m != model) {
      s.update_index(model, {{"model_class", "Model"}}, pending, {});
      pending.clear();
    }
    model = m;
    pending.push_back(entry_for(m, "f" + std::to_string(i), o));
  }
  if (!pending.empty()) s.update_index(model, {{"model_class", "Model"}}, pending, {});
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  fs::path root = fs::temp_directory_path() / ("npucache-bench-store-" + std::to_string(::getpid()));
  int trials = 9;
  std::size_t total_mb = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--dir") == 0)
      root = argv[i + 1];
    else if (std::strcmp(argv[i], "--trials") == 0)
      trials = std::stoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--total-mb") == 0)
      total_mb = std::stoull(argv[i + 1]);
  }
  fs::create_directories(root);
  fs::permissions(root, fs::perms::owner_all, fs::perm_options::replace);
  const std::vector<int> sizes = {10, 100, 1000};
  std::vector<Cache> spread, single;
  std::printf("building caches of %zu MB under %s ...\n", total_mb, root.c_str());
  for (int n : sizes) {
    spread.push_back(build(root / ("spread" + std::to_string(n)), n, total_mb << 20, false));
    single.push_back(build(root / ("single" + std::to_string(n)), n, total_mb << 20, true));
  }
  const std::size_t commit_bytes = std::size_t{1} << 20;
  // Each trial commits a new object and entry, then removes them (so every
  // trial writes into a cache of the same size).
  uint64_t serial = 1;
  auto commit = [&](const Cache& c) {
    return [&c, &serial, commit_bytes] {
      const storage::Store s = storage::Store::open(c.dir.string(), storage::Create::no);
      storage::ObjectRecord o = object_of(0xC0FFEE00 + serial++, commit_bytes);
      const std::string model = c.one_model ? "Big_dynamic_0000000000000000" : "Model0_dynamic_0";
      const double t0 = perf::now_s();
      {
        const storage::Writing writing = s.writing();
        o.meta.checksum = s.put_object(o, writing).stored.meta.checksum;
        s.update_index(model, {{"model_class", "Model"}}, {entry_for(model, "new", o)}, {}, writing);
      }
      const double t = perf::now_s() - t0;
      s.update_index(model, {{"model_class", "Model"}}, {}, {model + "/new"});
      s.remove_object(o.graph_key, s.sweeping(storage::kAdminWaitSeconds));
      return t;
    };
  };
  // The entry loads read: one 1 MiB object committed once per cache.
  std::vector<std::string> loaded_keys;
  for (auto* set : {&spread, &single})
    for (const Cache& c : *set) {
      const storage::Store s = storage::Store::open(c.dir.string(), storage::Create::no);
      const storage::ObjectRecord o = object_of(0xBEEF, commit_bytes);
      const std::string model = c.one_model ? "Big_dynamic_0000000000000000" : "Model0_dynamic_0";
      storage::ObjectRecord stored = s.put_object(o, s.writing()).stored;
      s.update_index(model, {{"model_class", "Model"}}, {entry_for(model, "loaded", stored)}, {});
      loaded_keys.push_back(o.graph_key);
    }
  auto load = [](const Cache& c) {
    return [&c] {
      const std::string model = c.one_model ? "Big_dynamic_0000000000000000" : "Model0_dynamic_0";
      const double t0 = perf::now_s();
      const storage::Store s = storage::Store::open(c.dir.string(), storage::Create::no);
      auto e = s.entry(model + "/loaded");
      if (!e) throw std::runtime_error("entry missing");
      const storage::ObjectRecord o = s.object(e->graph_key, false);
      const double t = perf::now_s() - t0;
      if (o.raw.size() != std::size_t{1} << 20) throw std::runtime_error("wrong object");
      return t;
    };
  };
  auto floor = [](const Cache& c, const std::string& key) {
    return [&c, key] {
      const double t0 = perf::now_s();
      std::ifstream f(c.dir / storage::names::kObjectsDir / storage::names::object_file(key), std::ios::binary);
      const std::string file((std::istreambuf_iterator<char>(f)), {});
      // The compressed artifact is most of the file: decompress the zstd
      // frame found in it, and checksum what comes out.
      const auto at = file.find("\x28\xb5\x2f\xfd");
      const std::size_t frame = ZSTD_findFrameCompressedSize(file.data() + at, file.size() - at);
      const std::string raw = zstd::decompress(std::string_view(file).substr(at, frame), std::size_t{64} << 20);
      volatile uint64_t h = XXH3_64bits(raw.data(), raw.size());
      (void)h;
      return perf::now_s() - t0;
    };
  };
  std::vector<std::function<double()>> variants;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    variants.push_back(commit(spread[i]));
    variants.push_back(commit(single[i]));
    variants.push_back(load(spread[i]));
    variants.push_back(floor(spread[i], loaded_keys[i]));
  }
  const std::vector<double> t = perf::interleaved(variants, trials);
  std::printf("\nstore cost against cache size, median of %d interleaved trials (1 MiB commits and loads)\n", trials);
  std::printf("%8s %10s %12s %12s %12s %12s %10s\n", "entries", "MB stored", "commit ms", "commit* ms", "load ms",
              "floor ms", "load/floor");
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const double* r = &t[i * 4];
    std::printf("%8d %10.1f %12.2f %12.2f %12.2f %12.2f %10.2f\n", sizes[i],
                static_cast<double>(spread[i].bytes) / (1 << 20), r[0] * 1e3, r[1] * 1e3, r[2] * 1e3, r[3] * 1e3,
                r[2] / r[3]);
  }
  std::printf("commit at 1000 entries / at 10: %.2fx (models of 8 entries), %.2fx (one model of them all)\n",
              t[8] / t[0], t[9] / t[1]);
  std::printf("commit*: the model's own index is rewritten, so its cost follows that model's entries, not the cache\n");
  std::error_code ec;
  fs::remove_all(root, ec);
  return 0;
}
