#include "format/artifact.h"

#include <npucache/ir/hash.h>
#include <npucache/version.h>

#include "compiler/serialize.h"
#include "format/cache_error.h"
#include "format/names.h"
#include "process/context.h"
#include "process/env.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>

namespace npucache::format {
namespace {

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace

std::vector<std::string> parameter_names(const Graph& traced) { return bound_names(traced); }

std::string now_string() {
  // Whole microseconds of the Env's wall clock (a double holds them exactly
  // for dates within centuries of now).
  const auto t = static_cast<long long>(process::Context::current().env().wall_s() * 1e6);
  std::time_t secs = static_cast<std::time_t>(t / 1000000);
  const long long us = t % 1000000;
  std::tm tm;
  localtime_r(&secs, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  char zone[16];
  if (std::strftime(zone, sizeof zone, "%z", &tm) == 0) zone[0] = '\0';
  char out[96];
  std::snprintf(out, sizeof out, "%s.%06lld%s", buf, static_cast<long long>(us), zone);
  return out;
}

std::optional<double> date_seconds(const std::string& date) {
  std::tm tm{};
  const char* rest = strptime(date.c_str(), "%Y-%m-%d %H:%M:%S", &tm);
  if (rest == nullptr) return std::nullopt;
  double fraction = 0;
  if (*rest == '.') {
    double scale = 0.1;
    for (++rest; *rest >= '0' && *rest <= '9'; ++rest, scale /= 10) fraction += (*rest - '0') * scale;
  }
  if ((*rest == '+' || *rest == '-') && std::strlen(rest) == 5 &&
      std::all_of(rest + 1, rest + 5, [](char c) { return c >= '0' && c <= '9'; })) {
    const int hh = (rest[1] - '0') * 10 + (rest[2] - '0'), mm = (rest[3] - '0') * 10 + (rest[4] - '0');
    if (hh > 14 || mm > 59) return std::nullopt;
    const std::time_t utc = timegm(&tm);
    if (utc == static_cast<std::time_t>(-1)) return std::nullopt;
    const int offset = (rest[0] == '-' ? -1 : 1) * (hh * 3600 + mm * 60);
    return static_cast<double>(utc - offset) + fraction;
  }
  if (*rest != '\0') return std::nullopt;
  tm.tm_isdst = -1;
  const std::time_t local = std::mktime(&tm);
  if (local == static_cast<std::time_t>(-1)) return std::nullopt;
  return static_cast<double>(local) + fraction;
}

ObjectRecord make_object(const compiler::CompiledGraph& g, const GraphId& id, bool with_program, const Producer& who,
                         const std::string* raw) {
  ObjectRecord o;
  o.graph_key = id.key;
  o.raw = raw ? *raw : compiler::serialize_compiled(g, with_program);
  std::string text = print_graph(g.trace.graph);
  for (const auto& [key, body] : g.trace.regions) text += "# region " + key + "\n" + print_graph(body);
  o.graph_text = lines(text);
  ObjectMeta& m = o.meta;
  // The content hash of the save, computed here once and carried: the
  // object file, the store, the entries, bundles and the remote tier take
  // it from the record; only bytes read back from outside are hashed again.
  m.checksum = checksum(o.raw);
  m.raw_size = o.raw.size();
  m.with_program = with_program;
  m.compile_time_s = g.compile_seconds;
  for (const auto& t : g.timings)
    m.pass_times += (m.pass_times.empty() ? "" : "; ") + t.name + "=" + std::to_string(t.seconds * 1e3) + "ms";
  m.mode = std::string(compile_mode_name(g.config.mode));
  m.dynamic = g.dynamic;
  m.canonical_hash = id.canonical_hash;
  m.producer = who;
  m.date = now_string();
  m.version = version();
  return o;
}

EntryRecord make_entry(const compiler::CompiledGraph& g, const std::string& path, const LookupKey& key,
                       const Producer& who, const ObjectRecord& object) {
  EntryRecord e;
  e.path = path;
  e.graph_key = object.graph_key;
  e.parameters = parameter_names(g.trace.graph);
  e.meta.name = g.trace.name;
  e.meta.date = now_string();
  e.meta.version = names::kFormatVersion;
  e.meta.lookup_key = key.hash;
  e.meta.model_info = key.model_info;
  e.meta.components = key.components;
  e.meta.rank = who;
  e.object_checksum = object.meta.checksum;
  e.compile_time_s = object.meta.compile_time_s;
  e.with_program = object.meta.with_program;
  return e;
}

void check_binds(const compiler::CompiledGraph& g, const nn::Module& module) {
  std::map<std::string, TensorType> has;
  for (const auto& [n, t] : module.named_parameters()) has[n] = t.type();
  for (const auto& [n, t] : module.named_buffers()) has[n] = t.type();
  const compiler::DeviceProgram& p = g.program;
  for (const auto& b : p.buffers) {
    if (b.kind != compiler::BufferKind::parameter) continue;
    const std::string& name = p.parameters.at(static_cast<std::size_t>(b.index)).name;
    auto it = has.find(name);
    if (it == has.end()) throw CacheError("its program reads parameter '" + name + "', which the module does not have");
    if (!(it->second == b.type))
      throw CacheError("its program reads parameter '" + name + "' as " + type_str(b.type) + ", the module's is " +
                       type_str(it->second));
  }
}

std::shared_ptr<compiler::CompiledGraph> load_object(const ObjectRecord& o, const std::vector<std::string>& parameters,
                                                     bool* with_program) {
  auto g = std::make_shared<compiler::CompiledGraph>();
  try {
    *g = compiler::deserialize_compiled(o.raw, with_program);
  } catch (const Error& e) {
    throw CacheError(std::string("object ") + o.graph_key + " cannot be decoded: " + e.what());
  }
  // Rebind parameter placeholders (graph order) to this entry's names.
  std::size_t k = 0;
  for (Node& n : g->trace.graph.mutable_nodes())
    if (n.op == Op::placeholder && n.kind != PlaceholderKind::input) {
      if (k >= parameters.size()) throw CacheError("entry lists fewer parameters than object " + o.graph_key + " uses");
      n.target = parameters[k++];
    }
  if (k != parameters.size()) throw CacheError("entry lists more parameters than object " + o.graph_key + " uses");
  // The program and the optimized graph keep the traced placeholder order
  // (passes never drop or reorder placeholders).
  if (*with_program && g->program.parameters.size() != parameters.size())
    throw CacheError("object " + o.graph_key + "'s program binds " + std::to_string(g->program.parameters.size()) +
                     " parameters, its graph " + std::to_string(parameters.size()));
  for (std::size_t j = 0; j < g->program.parameters.size(); ++j) g->program.parameters[j].name = parameters[j];
  if (!g->calling.parameters.empty()) g->calling.parameters = g->program.parameters;  // linked in the same order
  std::size_t m = 0;
  for (Node& n : g->optimized.mutable_nodes())
    if (n.op == Op::placeholder && n.kind != PlaceholderKind::input) {
      if (m >= parameters.size())
        throw CacheError("object " + o.graph_key + "'s optimized graph has more parameters than its graph");
      n.target = parameters[m++];
    }
  return g;
}

std::string model_cache_meta(const EntryMeta& e) {
  return "ModelCacheMeta(name='" + e.name + "', date='" + e.date + "', version='" + e.version + "', fx=" + e.fx + ")";
}

}  // namespace npucache::format
