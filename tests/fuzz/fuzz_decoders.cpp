// Mutation fuzzing of every decoder that reads bytes npucache did not just
// produce itself: cache files, bundles, compiled artifacts, zstd frames,
// the JSON side files, the replies of whatever listens on a remote's port,
// a remote's signature records. A decoder must turn any input into a value or an
// npucache::Error; anything else (a crash, a sanitizer report, another
// exception type, std::bad_alloc from an unbounded allocation) is a
// finding. Compiled programs that decode are also run on the simulated
// NPU, so validate_program's promise (a program that passes cannot make a
// kernel read or write out of bounds) is checked, not assumed.
//
//   fuzz_decoders [--seconds S] [--runs N] [--seed K] [--findings DIR]
//                 [--write-seeds DIR] [FILE|DIR...]
//
// Seeds are made in-process (real caches of the reference models, their
// bundle, the artifacts and frames inside them), so they follow the format
// as it evolves. FILEs and the .bin files of DIRs (first byte: the target,
// the rest: its input) are replayed first and then mutated with the seeds:
// tests/fuzz/corpus/ is a checked-in corpus (seeds of an earlier format
// version among them, which must be refused cleanly), tests/fuzz/regressions/
// holds every input that once failed. A finding is written to DIR (default: the current directory) as
// finding-<target>-<n>.bin, replayable as a FILE.
#include <npucache/cache.h>
#include <npucache/error.h>
#include <npucache/models/decoder.h>
#include <npucache/models/models.h>
#include <npucache/runtime/communicator.h>

#include "admin/admin.h"
#include "cache/runnable.h"
#include "compiler/capture_template.h"
#include "compiler/engine.h"
#include "compiler/executor.h"
#include "compiler/serialize.h"
#include "compiler/tuning_table.h"
#include "format/bundle.h"
#include "format/envelope.h"
#include "format/index_file.h"
#include "format/names.h"
#include "format/object_file.h"
#include "format/profile_file.h"
#include "format/region_file.h"
#include "format/remote_value.h"
#include "format/template_file.h"
#include "format/tuning_file.h"
#include "fuzz/mutator.h"
#include "remote/redis.h"
#include "remote/resp_reader.h"
#include "remote/signing.h"
#include "storage/stats.h"
#include "storage/store.h"
#include "support/temp_dir.h"
#include "zstd/zstd_codec.h"

#include <xxhash.h>

#include <fcntl.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

extern "C" void __sanitizer_set_death_callback(void (*)(void)) __attribute__((weak));

using namespace npucache;
namespace fs = std::filesystem;

namespace {

// The method cache's decode, as import checks a bundle's objects.
void decodes(const cache::ObjectRecord& o, const std::vector<std::string>* parameters) {
  (void)(parameters ? cache::decode(o, *parameters) : cache::decode(o));
}

enum Target : uint8_t {
  kIndexFile,        // an index file, as read from the cache directory
  kObjectFile,       // an object file
  kBundleFile,       // a Mega-Cache bundle, as imported
  kIndexRecords,     // an index's records, sealed in a valid envelope (an attacker who fixes checksums)
  kBundleRecords,    // a bundle's decoded records, compressed and framed with a valid checksum
  kCompiled,         // a serialized compiled graph; run when it decodes with a program
  kZstdFrame,        // a zstd frame
  kJsonFiles,        // stats.json and config.json
  kTuningFile,       // the tuning table file, as read from the cache directory
  kTuningRecords,    // its records, sealed in a valid envelope (checksums fixed)
  kRemoteValue,      // a remote tier value after a selector (mod 4: object, hashed object, entry, blob)
  kRemoteSealed,     // the same with the value's checksums fixed (an attacker who recomputes them)
  kTemplateFile,     // a capture template's file (templates/<key>.h5)
  kTemplateReplay,   // a capture template restored against its program and replayed: equal to a capture or refused
  kProfileFile,      // the dynamic-shape profiles file
  kObjectRecords,    // an object file's record, sealed in a valid envelope (checksums fixed)
  kRespReplies,      // bytes from a remote's port, fed to the reply reader in pieces (first byte: the piece size)
  kSignatureRecord,  // a remote's signature record, decoded and verified for a key
  kRegionFile,       // a compiled region's file (regions/<key>.h5)
  kRegionRecord,     // a compiled region's encoding (compiler::deserialize_region)
  kTargets
};
const char* const kTargetNames[] = {"index-file",     "object-file",      "bundle-file",  "index-records",
                                    "bundle-records", "compiled",         "zstd-frame",   "json-files",
                                    "tuning-file",    "tuning-records",   "remote-value", "remote-sealed",
                                    "template-file",  "template-replay",  "profile-file", "object-records",
                                    "resp-replies",   "signature-record", "region-file",  "region-record"};

// The program kTemplateReplay restores fuzzed templates against: the seed
// model's prompt in reduce-overhead, its call and its uncaptured result.
struct TemplateProgram {
  std::shared_ptr<const compiler::DeviceProgram> program;
  std::vector<Tensor> inputs, params;
  SymBindings binding;
  std::vector<std::vector<float>> expected;
};

// Gives one fuzzed template to a runner.
struct FixedTemplate final : compiler::TemplateStore {
  std::string bytes;
  explicit FixedTemplate(std::string b) : bytes(std::move(b)) {}
  std::optional<std::string> load(const SymBindings&, const compiler::TemplateSettings&, std::string&) override {
    return bytes;
  }
  void save(const SymBindings&, const compiler::TemplateSettings&, const std::string&) override {}
};

struct Globals {
  TemplateProgram tpl;
  std::string index_hdf5;   // the HDF5 view sealed with fuzzed index records
  std::string tuning_hdf5;  // the HDF5 view sealed with fuzzed tuning records
  std::string object_hdf5;  // the HDF5 part sealed with fuzzed object records
  fs::path scratch;         // a directory for the JSON target
  fs::path findings = ".";
  std::string current;  // the input being run (dumped when a sanitizer aborts)
  int findings_written = 0;
  uint64_t accepted[kTargets] = {};  // inputs decoded without an error
  uint64_t programs_run = 0;
  bool verbose = false;  // print each program before running it (to study a finding)
} g;

// Where a crash writes the input that caused it (set before any input
// runs: the handler only calls async-signal-safe functions).
std::string crash_path;

void dump_current() {
  const int f = ::open(crash_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (f >= 0) {
    ssize_t ignored = ::write(f, g.current.data(), g.current.size());
    (void)ignored;
    ::close(f);
  }
  const char msg[] = "fuzz_decoders: the input that crashed was written to ";
  ssize_t ignored = ::write(2, msg, sizeof msg - 1);
  ignored = ::write(2, crash_path.data(), crash_path.size());
  ignored = ::write(2, "\n", 1);
  (void)ignored;
}

void on_fatal_signal(int sig) {
  dump_current();
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// ---- targets -------------------------------------------------------------

// [u32 length][bytes] ... (a bounded framing of several byte strings).
std::vector<std::string> split_frames(std::string_view in) {
  std::vector<std::string> out;
  while (in.size() >= 4 && out.size() < 4096) {
    uint32_t n;
    std::memcpy(&n, in.data(), 4);
    in.remove_prefix(4);
    n = std::min<uint32_t>(n, static_cast<uint32_t>(in.size()));
    out.emplace_back(in.substr(0, n));
    in.remove_prefix(n);
  }
  return out;
}

std::string join_frames(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) {
    const uint32_t n = static_cast<uint32_t>(p.size());
    out.append(reinterpret_cast<const char*>(&n), 4);
    out += p;
  }
  return out;
}

template <class T>
void put(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// A bundle around `records` with a correct header (docs/FORMAT.md) of
// this build's version.
std::string frame_bundle(std::string_view records) {
  const std::string payload = zstd::compress(records, 1);
  std::string out = "NPUCBNDL";
  put<uint32_t>(out, 6);
  put<uint64_t>(out, payload.size());
  put<uint64_t>(out, records.size());
  put<uint64_t>(out, XXH3_64bits(payload.data(), payload.size()));
  return out + payload;
}

// The records a bundle's payload holds (for seeds).
std::string bundle_records(const std::string& bundle) {
  return zstd::decompress(std::string_view(bundle).substr(36), std::size_t{1} << 30);
}

// Runs a decoded program with every symbol bound to 2 and small inputs.
void run_program(const compiler::CompiledGraph& cg) {
  const auto& p = cg.program;
  SymBindings b;
  for (const auto& buf : p.buffers)
    if (buf.kind == compiler::BufferKind::input || buf.kind == compiler::BufferKind::parameter)
      for (const auto& d : buf.type.shape)
        for (const auto& s : d.symbols()) b[s] = 2;
  std::vector<Tensor> inputs(static_cast<std::size_t>(p.num_inputs));
  std::vector<Tensor> params(p.parameters.size());
  for (const auto& buf : p.buffers) {
    std::vector<Tensor>* into = buf.kind == compiler::BufferKind::input       ? &inputs
                                : buf.kind == compiler::BufferKind::parameter ? &params
                                                                              : nullptr;
    if (!into || buf.index < 0 || static_cast<std::size_t>(buf.index) >= into->size()) continue;
    const auto dims = evaluate_dims(buf.type.shape, b);
    int64_t n = 1;
    for (int64_t d : dims) {
      if (d < 0 || d > (1 << 16)) return;  // not a call anyone could make
      n *= d;
      if (n > (1 << 16)) return;
    }
    std::vector<float> data(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i % 7) * 0.25f;
    if (buf.type.dtype == DType::i64) {
      std::vector<int64_t> ints(data.size());
      for (std::size_t i = 0; i < ints.size(); ++i) ints[i] = static_cast<int64_t>(i % 3);
      (*into)[static_cast<std::size_t>(buf.index)] = Tensor::from_vector_i64(ints, dims);
    } else {
      (*into)[static_cast<std::size_t>(buf.index)] = Tensor::from_vector(data, dims, buf.type.dtype);
    }
  }
  for (const auto& t : inputs)
    if (!t.defined()) return;
  for (const auto& t : params)
    if (!t.defined()) return;
  if (g.verbose) {
    for (std::size_t i = 0; i < p.buffers.size(); ++i)
      std::fprintf(stderr, "buffer %zu: kind %d index %d %s\n", i, static_cast<int>(p.buffers[i].kind),
                   p.buffers[i].index, type_str(p.buffers[i].type).c_str());
    for (std::size_t i = 0; i < p.steps.size(); ++i) {
      std::string ops;
      for (int o : p.steps[i].operands) ops += " " + std::to_string(o);
      std::fprintf(stderr, "step %zu: %s(%s) -> %d %s\n", i, std::string(op_name(p.steps[i].op)).c_str(), ops.c_str(),
                   p.steps[i].result,
                   [&] {
                     std::string a;
                     for (const auto& [k, v] : p.steps[i].attrs.items()) a += " " + k + "=" + attr_str(v);
                     return a;
                   }()
                       .c_str());
    }
  }
  compiler::ProgramRunner runner(std::make_shared<const compiler::DeviceProgram>(p), 0);
  for (const auto& out : runner.run(inputs, params, b, current_communicator())) (void)out.to_vector();
  ++g.programs_run;
}

// Recomputes a remote value's payload and header checksums
// (cache/remote_value.cpp: payload xxh3 at 32, header xxh3 at 40).
std::string fix_remote_checksums(std::string_view in) {
  std::string v(in);
  if (v.size() < 48) return v;
  const uint64_t payload = XXH3_64bits(v.data() + 48, v.size() - 48);
  std::memcpy(v.data() + 32, &payload, 8);
  const uint64_t header = XXH3_64bits(v.data(), 40);
  std::memcpy(v.data() + 40, &header, 8);
  return v;
}

// A remote value of the kind its first byte names, decoded as the tier
// does (an object's bytes also deserialized and validated).
void decode_remote(std::string_view in) {
  if (in.empty()) return;
  const std::string value(in.substr(1));
  switch (static_cast<uint8_t>(in[0]) % 4) {
    case 0: {
      auto o = cache::decode_remote_object(value, "", "", std::size_t{64} << 20);
      compiler::deserialize_compiled(o.raw);
      break;
    }
    case 1: {  // an object whose entry named its content hash (its payload checksum is not read)
      auto o = cache::decode_remote_object(value, cache::content_hash(value), "", std::size_t{64} << 20);
      compiler::deserialize_compiled(o.raw);
      break;
    }
    case 2: cache::decode_remote_entry(value, "", ""); break;
    case 3: {
      auto b = cache::decode_blob(value, cache::BlobKind::tuning, "");
      cache::decode_tuning_record(b.bytes, "fuzzed remote tuning record");
      break;
    }
  }
}

// What a server (or anything on the remote's port) sends, fed to the reply
// reader as recv() hands it over: every reply is taken as soon as it is
// whole; a protocol violation is a RedisError, turned into the failed
// operation it is for the tier (an npucache::Error here).
void read_replies(std::string_view in) {
  if (in.empty()) return;
  const std::size_t piece = 1 + static_cast<uint8_t>(in[0]);
  in.remove_prefix(1);
  remote::ReplyLimits limits;
  limits.max_string = std::size_t{1} << 20;
  remote::RespReader reader(limits);
  try {
    for (std::size_t at = 0; at < in.size(); at += piece) {
      reader.feed(in.data() + at, std::min(piece, in.size() - at));
      while (reader.next()) {
      }
    }
  } catch (const remote::RedisError& e) {
    throw Error(std::string("remote reply: ") + e.what());
  }
}

void run_target(Target t, std::string_view in) {
  switch (t) {
    case kIndexFile: cache::decode_index(in, "fuzzed index"); break;
    case kObjectFile: {
      auto o = cache::decode_object(in, "fuzzed object", true);
      // The warm read (the artifact's one chunk, without HDF5) gives the
      // bytes HDF5 gave.
      if (cache::decode_object(in, "fuzzed object", false).raw != o.raw) std::abort();
      compiler::deserialize_compiled(o.raw);
      break;
    }
    case kBundleFile: cache::validate_bundle(cache::read_bundle(in), decodes); break;
    case kIndexRecords: {
      const auto records = split_frames(in);
      const std::string file =
          cache::seal(cache::EnvelopeKind::index, records, g.index_hdf5, cache::userblock_for(records));
      cache::decode_index(file, "fuzzed index records");
      break;
    }
    case kBundleRecords: cache::validate_bundle(cache::read_bundle(frame_bundle(in)), decodes); break;
    case kCompiled: {
      bool with_program = false;
      auto cg = compiler::deserialize_compiled(in, &with_program);
      if (with_program) run_program(cg);
      break;
    }
    case kZstdFrame: zstd::decompress(in, std::size_t{1} << 20); break;
    case kJsonFiles: {
      const auto parts = split_frames(in);
      for (std::size_t i = 0; i < 2; ++i) {
        std::ofstream f(g.scratch / (i == 0 ? "stats.json" : "config.json"), std::ios::binary | std::ios::trunc);
        if (i < parts.size()) f << parts[i];
      }
      cache::read_stats(g.scratch);
      cache::max_size(g.scratch.string());
      break;
    }
    case kTuningFile: cache::decode_tuning(in, "fuzzed tuning table"); break;
    case kTuningRecords: {
      const auto records = split_frames(in);
      const std::string file =
          cache::seal(cache::EnvelopeKind::tuning, records, g.tuning_hdf5, cache::userblock_for(records));
      cache::decode_tuning(file, "fuzzed tuning records");
      break;
    }
    case kTemplateFile: cache::decode_template_file(in, "fuzzed template"); break;
    case kRegionFile: format::decode_region_file(in, "fuzzed region"); break;
    case kRegionRecord: (void)compiler::deserialize_region(in); break;
    case kTemplateReplay: {
      // A template the runner accepts must compute what a capture computes;
      // one it refuses is captured again. Anything else is a finding.
      compiler::ProgramRunner runner(g.tpl.program, 0);
      runner.set_templates(std::make_shared<FixedTemplate>(std::string(in)));
      const auto outs = runner.replay(g.tpl.inputs, g.tpl.params, g.tpl.binding, current_communicator());
      for (std::size_t i = 0; i < outs.size(); ++i)
        if (outs[i].to_vector() != g.tpl.expected.at(i))
          throw std::runtime_error("a restored capture template computed a wrong value (restores " +
                                   std::to_string(runner.restores()) + ")");
      break;
    }
    case kProfileFile: cache::decode_profiles(in, "fuzzed profiles"); break;
    case kObjectRecords: {
      const auto records = split_frames(in);
      const std::string file =
          cache::seal(cache::EnvelopeKind::object, records, g.object_hdf5, cache::userblock_for(records));
      auto o = cache::decode_object(file, "fuzzed object records", true);
      compiler::deserialize_compiled(o.raw);
      break;
    }
    case kRespReplies: read_replies(in); break;
    case kSignatureRecord: {
      std::string why;
      if (const auto r = remote::signing::decode(in, &why)) (void)remote::signing::verify(*r, "npucache:fuzz:obj:key");
      break;
    }
    case kRemoteValue: decode_remote(in); break;
    case kRemoteSealed:
      if (!in.empty()) decode_remote(std::string(in.substr(0, 1)) + fix_remote_checksums(in.substr(1)));
      break;
    default: break;
  }
}

// One input: true when the decoder behaved (a value or an npucache::Error).
bool run_one(const std::string& input, std::string* finding) {
  if (input.empty() || static_cast<uint8_t>(input[0]) >= kTargets) return true;
  g.current = input;
  const auto t = static_cast<Target>(input[0]);
  try {
    run_target(t, std::string_view(input).substr(1));
    ++g.accepted[t];
    return true;
  } catch (const Error&) {
    return true;
  } catch (const std::bad_alloc&) {
    *finding = "std::bad_alloc (an allocation sized by the input)";
  } catch (const std::exception& e) {
    *finding = std::string("an exception that is not an npucache::Error: ") + e.what();
  } catch (...) {
    *finding = "an exception of unknown type";
  }
  return false;
}

// ---- seeds ---------------------------------------------------------------

struct Seeds {
  std::vector<std::string> inputs;  // target byte + input
  void add(Target t, std::string_view bytes) {
    inputs.push_back(std::string(1, static_cast<char>(t)) + std::string(bytes));
  }
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Real caches: the seed model and tiny-llama, with and without programs.
Seeds make_seeds(const fs::path& dir) {
  CompilerConfig c;
  c.autotune_candidates = 2;
  c.autotune_min_time_us = 0;
  {
    models::SeedExample m;
    for (int variant = 0; variant < 3; ++variant) {
      CacheOptions o;
      o.cache_dir = (dir / "seed").string();
      CompilerConfig cv = c;
      if (variant == 2) cv.mode = CompileMode::reduce_overhead;
      o.compile.config = cv;
      o.compile.dynamic = variant != 1;
      o.ge_cache = variant == 1;
      auto fn = cache_compile(m, variant == 0 ? &models::SeedExample::prompt : &models::SeedExample::decode, o);
      models::InputMeta x{Tensor::from_vector({1, 2, 3, 4, 5, 6}, {3, 2}), true};
      fn(x, std::vector<Tensor>{Tensor::from_vector({.5f, .5f, .5f, .5f, .5f, .5f}, {3, 2})}).to_vector();
    }
  }
  {
    models::TinyLlama m(models::TinyLlamaConfig{}, {});
    for (int variant = 0; variant < 2; ++variant) {
      CacheOptions o;
      o.cache_dir = (dir / "llama").string();
      o.compile.config = c;
      o.ge_cache = variant == 1;
      auto prompt = cache_compile(m, &models::TinyLlama::prompt, o);
      auto decode = cache_compile(m, &models::TinyLlama::decode, o);
      auto kv = m.make_kv_cache(1);
      prompt(Tensor::from_vector_i64({1, 2, 3, 4}, {1, 4}), Tensor::from_vector_i64({0, 1, 2, 3}, {1, 4}), kv);
      decode(Tensor::from_vector_i64({5}, {1, 1}), Tensor::from_vector_i64({4}, {1, 1}), kv).to_vector();
    }
  }
  {
    // The shipped decoder, whose layers are compile regions: objects holding
    // the method's program with its calls and each region's program once.
    models::Decoder m(models::DecoderConfig{}, models::StageRanks{}, models::Weights::deterministic);
    CacheOptions o;
    o.cache_dir = (dir / "llama").string();
    o.compile.config = c;
    auto prompt = cache_compile(m, &models::Decoder::prompt, o);
    auto kv = m.make_kv_cache(1);
    prompt(Tensor::from_vector_i64({1, 2, 3, 4}, {1, 4}), Tensor::from_vector_i64({0, 1, 2, 3}, {1, 4}), kv);
  }
  {
    // The seed model's prompt in reduce-overhead under automatic dynamic
    // (a profile), and the program kTemplateReplay restores templates of.
    models::SeedExample m;
    CacheOptions o;
    o.cache_dir = (dir / "seed").string();
    o.compile.mode = "reduce-overhead";
    o.compile.dynamic = std::nullopt;
    auto fn = cache_compile(m, &models::SeedExample::prompt, o);
    for (int64_t b : {3, 5}) {
      std::vector<float> v(static_cast<std::size_t>(b * 2), 0.25f);
      const std::vector<Tensor> kv{Tensor::from_vector(std::vector<float>(v.size(), 0.5f), {b, 2})};
      fn(models::InputMeta{Tensor::from_vector(v, {b, 2}), true}, kv).to_vector();
    }
    const auto& cg = detail::entry(fn.engine(), 1);
    g.tpl.program = std::make_shared<const compiler::DeviceProgram>(cg.program);
    FlatArgs args;
    models::InputMeta x{Tensor::from_vector({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {5, 2}), true};
    std::vector<Tensor> kv5{Tensor::from_vector(std::vector<float>(10, 0.5f), {5, 2})};
    flatten(std::string("arg0"), x, args);
    flatten(std::string("arg1"), kv5, args);
    g.tpl.binding = cg.trace.signature.bind(args);
    for (const auto& [path, t] : args.tensors) g.tpl.inputs.push_back(t);
    std::map<std::string, Tensor> by_name;
    for (auto& [n, t] : m.named_parameters()) by_name[n] = t;
    for (const auto& ref : g.tpl.program->parameters) g.tpl.params.push_back(by_name.at(ref.name));
    compiler::ProgramRunner plain(g.tpl.program, 0);
    for (const auto& out : plain.run(g.tpl.inputs, g.tpl.params, g.tpl.binding, current_communicator()))
      g.tpl.expected.push_back(out.to_vector());
  }
  cache::flush_stats();
  Seeds s;
  for (const char* sub : {"seed", "llama"}) {
    const fs::path d = dir / sub;
    for (const auto& f : fs::directory_iterator(d)) {
      const std::string name = f.path().filename().string();
      if (name == cache::names::kProfileFile) {
        s.add(kProfileFile, slurp(f.path()));
      } else if (name == cache::names::kTuningFile) {
        const std::string bytes = slurp(f.path());
        s.add(kTuningFile, bytes);
        auto env = cache::open_envelope(cache::EnvelopeKind::tuning, bytes, name);
        if (g.tuning_hdf5.empty()) g.tuning_hdf5 = std::string(env.hdf5);
        s.add(kTuningRecords, join_frames(env.records));
      } else if (f.path().extension() == ".h5") {
        const std::string bytes = slurp(f.path());
        s.add(kIndexFile, bytes);
        auto env = cache::open_envelope(cache::EnvelopeKind::index, bytes, name);
        if (g.index_hdf5.empty()) g.index_hdf5 = std::string(env.hdf5);
        s.add(kIndexRecords, join_frames(env.records));
      } else if (name == "stats.json") {
        s.add(kJsonFiles, join_frames({slurp(f.path()), "{\"max_size\": 1048576}"}));
      }
    }
    if (fs::exists(d / cache::names::kTemplatesDir))
      for (const auto& f : fs::directory_iterator(d / cache::names::kTemplatesDir)) {
        const std::string bytes = slurp(f.path());
        s.add(kTemplateFile, bytes);
        s.add(kTemplateReplay, cache::decode_template_file(bytes, f.path().string()).bytes);
      }
    if (fs::exists(d / format::names::kRegionsDir))
      for (const auto& f : fs::directory_iterator(d / format::names::kRegionsDir)) {
        const std::string bytes = slurp(f.path());
        s.add(kRegionFile, bytes);
        const auto region = format::decode_region_file(bytes, f.path().string());
        s.add(kRegionRecord, compiler::serialize_region(region.artifact));
      }
    // The remote tier's values of the same cache (cache/remote_value.h).
    const auto remote = [&](uint8_t kind, const std::string& value) {
      s.add(kRemoteValue, std::string(1, static_cast<char>(kind)) + value);
      s.add(kRemoteSealed, std::string(1, static_cast<char>(kind)) + value);
    };
    for (const auto& m : cache::Store::open(d, cache::Create::no).model_infos())
      if (auto ix = cache::Store::open(d, cache::Create::no).index(m))
        for (const auto& e : ix->index.entries) remote(2, cache::encode_remote_entry({e, std::string(32, 'c')}));
    const auto decisions = compiler::TuningTable::process().records();  // a few: every target gets its share
    for (std::size_t i = 0; i < decisions.size() && i < 3; ++i) {
      const auto& r = decisions[i];
      remote(3,
             cache::encode_blob({cache::BlobKind::tuning, r.runtime + "\n" + r.key, cache::encode_tuning_record(r)}));
    }
    for (const auto& f : fs::directory_iterator(d / "objects")) {
      const std::string bytes = slurp(f.path());
      s.add(kObjectFile, bytes);
      {
        auto env = cache::open_envelope(cache::EnvelopeKind::object, bytes, f.path().string());
        if (g.object_hdf5.empty()) g.object_hdf5 = std::string(env.hdf5);
        if (std::string(env.hdf5) == g.object_hdf5) s.add(kObjectRecords, join_frames(env.records));
      }
      auto o = cache::decode_object(bytes, f.path().string(), true);
      const std::string value = cache::encode_remote_object(o);
      remote(0, value);
      remote(1, value);
      s.add(kCompiled, o.raw);
      s.add(kZstdFrame, zstd::compress(o.raw, 1));
    }
    const fs::path bundle = dir / (std::string(sub) + ".bundle");
    cache::admin::export_bundle(d.string(), bundle.string());
    const std::string b = slurp(bundle);
    s.add(kBundleFile, b);
    s.add(kBundleRecords, bundle_records(b));
  }
  // Replies as a Redis server sends them (a value, a pipeline, a SCAN page,
  // an error, nil, an integer), and signature records of a value.
  const std::string value = "npucache value";
  const std::string bulk = "$" + std::to_string(value.size()) + "\r\n" + value + "\r\n";
  for (const std::string& r :
       {bulk, "+OK\r\n" + bulk + "$-1\r\n:42\r\n", "*2\r\n$1\r\n0\r\n*2\r\n" + bulk + bulk,
        std::string("-WRONGPASS invalid username-password pair\r\n"), std::string("*-1\r\n*0\r\n")})
    for (char piece : {'\0', '\x03', '\xff'}) s.add(kRespReplies, std::string(1, piece) + r);
  const auto key = remote::signing::SigningKey::generate();
  s.add(kSignatureRecord, key->sign("npucache:fuzz:obj:key", value));
  s.add(kSignatureRecord, key->sign("npucache:fuzz:obj:other", value));
  return s;
}

void write_finding(const std::string& input, const std::string& why) {
  const auto t = static_cast<uint8_t>(input[0]);
  const fs::path p =
      g.findings / ("finding-" + std::string(kTargetNames[t]) + "-" + std::to_string(g.findings_written++) + ".bin");
  std::ofstream(p, std::ios::binary) << input;
  std::fprintf(stderr, "FINDING (%s): %s\n  input written to %s\n", kTargetNames[t], why.c_str(), p.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 10;
  std::optional<uint64_t> runs;
  uint64_t seed = 1;
  std::vector<std::string> files;
  fs::path write_seeds;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "fuzz_decoders: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--seconds")
      seconds = std::stod(value());
    else if (a == "--runs")
      runs = std::stoull(value());
    else if (a == "--seed")
      seed = std::stoull(value());
    else if (a == "--findings")
      g.findings = value();
    else if (a == "--write-seeds")
      write_seeds = value();
    else if (a == "--verbose")
      g.verbose = true;
    else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "fuzz_decoders: unknown option %s\n", a.c_str());
      return 2;
    } else
      files.push_back(a);
  }
  crash_path = (fs::absolute(g.findings) / ("finding-crash-" + std::to_string(::getpid()) + ".bin")).string();
  // ASan reports end in the death callback; UBSan (abort_on_error, as
  // scripts/fuzz.sh sets) and plain builds end in a signal.
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(dump_current);
  const std::vector<int> signals = __sanitizer_set_death_callback
                                       ? std::vector<int>{SIGABRT}
                                       : std::vector<int>{SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
  for (int sig : signals) ::signal(sig, on_fatal_signal);
  ::setenv("NPUCACHE_LOG_LEVEL", "error", 0);  // the damage the fuzzing makes is expected

  const testing_support::TempDir work_dir("fuzz");  // 0700, removed on return
  const fs::path& work = work_dir.path();
  fs::create_directories(work / "json");
  fs::permissions(work / "json", fs::perms::owner_all, fs::perm_options::replace);
  g.scratch = work / "json";

  Seeds seeds = make_seeds(work / "caches");
  std::size_t per[kTargets] = {};
  for (const auto& s : seeds.inputs) ++per[static_cast<uint8_t>(s[0])];
  for (int t = 0; t < kTargets; ++t)
    if (per[t] == 0) {
      std::fprintf(stderr, "fuzz_decoders: no seed for target %s\n", kTargetNames[t]);
      return 1;
    }
  if (!write_seeds.empty()) {
    fs::create_directories(write_seeds);
    for (std::size_t i = 0; i < seeds.inputs.size(); ++i)
      std::ofstream(write_seeds / ("seed-" + std::string(kTargetNames[static_cast<uint8_t>(seeds.inputs[i][0])]) + "-" +
                                   std::to_string(i) + ".bin"),
                    std::ios::binary)
          << seeds.inputs[i];
  }

  int failures = 0;
  std::string why;
  // Seeds decode cleanly (else the fuzzing below starts from broken inputs).
  for (const auto& s : seeds.inputs)
    if (!run_one(s, &why)) {
      write_finding(s, "an unmutated seed: " + why);
      ++failures;
    }
  std::vector<fs::path> replay;
  for (const auto& f : files) {
    if (fs::is_directory(f)) {
      for (const auto& e : fs::directory_iterator(f))
        if (e.path().extension() == ".bin") replay.push_back(e.path());
    } else {
      replay.push_back(f);
    }
  }
  std::sort(replay.begin(), replay.end());
  // Replayed inputs (the checked-in corpus, past findings) are mutated too.
  for (const auto& f : replay) {
    const std::string in = slurp(f);
    if (!run_one(in, &why)) {
      write_finding(in, f.string() + ": " + why);
      ++failures;
    }
    if (!in.empty() && static_cast<uint8_t>(in[0]) < kTargets) seeds.inputs.push_back(in);
  }

  fuzz::Mutator mutator(seed);
  std::mt19937_64 pick(seed * 7919 + 1);
  const auto start = std::chrono::steady_clock::now();
  uint64_t done = 0;
  uint64_t per_target[kTargets] = {};
  while (runs ? done < *runs
              : std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds) {
    const std::string& base = seeds.inputs[pick() % seeds.inputs.size()];
    const std::string& other = seeds.inputs[pick() % seeds.inputs.size()];
    const std::string in = mutator.mutate(base, other);
    ++done;
    ++per_target[static_cast<uint8_t>(in[0])];
    if (!run_one(in, &why)) {
      write_finding(in, why);
      if (++failures >= 10) break;
    }
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("fuzz_decoders: %zu seeds, %zu replayed, %llu mutated inputs in %.1f s (seed %llu):", seeds.inputs.size(),
              replay.size(), static_cast<unsigned long long>(done), took, static_cast<unsigned long long>(seed));
  for (int t = 0; t < kTargets; ++t)
    std::printf(" %s %llu (%llu decoded)", kTargetNames[t], static_cast<unsigned long long>(per_target[t]),
                static_cast<unsigned long long>(g.accepted[t]));
  std::printf("; %llu programs run; %d finding(s)\n", static_cast<unsigned long long>(g.programs_run), failures);
  // Every decoder is fuzzed: one that drew no mutated input (its seeds
  // went missing, the picker never reached it) fails the run.
  int unfuzzed = 0;
  for (int t = 0; t < kTargets; ++t)
    if (per_target[t] == 0 && failures < 10) {
      std::fprintf(stderr, "fuzz_decoders: decoder %s drew no mutated input: it was not fuzzed\n", kTargetNames[t]);
      ++unfuzzed;
    }
  return failures == 0 && unfuzzed == 0 ? 0 : 1;
}
