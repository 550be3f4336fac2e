// Converting compiled graphs to stored records and back.
#pragma once

#include "compiler/compiled_graph.h"
#include "format/keys.h"
#include "format/records.h"

#include <memory>
#include <optional>
#include <string>

namespace npucache::format {

// The object for `g`: serialized (with the DeviceProgram when
// `with_program`), its traced graph as text, compile metadata. `raw`, when
// given, are the already serialized bytes of `g`.
ObjectRecord make_object(const compiler::CompiledGraph& g, const GraphId& id, bool with_program, const Producer& who,
                         const std::string* raw = nullptr);

// The entry at `path` for rank `who`, pointing at `object`: every
// lookup-key component, the seed's ModelCacheMeta fields and the parameter
// bindings of `g`.
EntryRecord make_entry(const compiler::CompiledGraph& g, const std::string& path, const LookupKey& key,
                       const Producer& who, const ObjectRecord& object);

// Deserializes an object; `parameters` rebinds the program's and graph's
// parameter placeholders to this entry's names (ranks sharing an object may
// name their parameters differently). Throws CacheError when undecodable.
std::shared_ptr<compiler::CompiledGraph> load_object(const ObjectRecord& o, const std::vector<std::string>& parameters,
                                                     bool* with_program);

// Whether the module has every parameter and buffer the program reads, of
// the type the program reads it as: throws CacheError naming the first one
// that does not (an entry altered or written for another module).
void check_binds(const compiler::CompiledGraph& g, const nn::Module& module);

// Parameter and buffer names of a traced graph, in placeholder order.
std::vector<std::string> parameter_names(const Graph& traced);

// "2026-11-21 23:50:01.123456+0800": the Env's wall clock in local time,
// with its offset from UTC (format 11.0.0; without one before).
std::string now_string();
// The unix time a date of now_string() names: with its offset when it has
// one, else read as this machine's local time (an earlier format's, or a
// writer's in another zone: off by the zones' difference); nullopt when it
// is not such a date.
std::optional<double> date_seconds(const std::string& date);
// A date, or a recorded use, more than this ahead of the reader's clock is
// not trusted (a writer's clock ahead, a planted date): gc's ages, an
// import's "saved later", the stats' later use.
inline constexpr double kDateAheadSeconds = 300;
// ModelCacheMeta(name='...', date='...', version='...', fx=None)
std::string model_cache_meta(const EntryMeta& e);

}  // namespace npucache::format
