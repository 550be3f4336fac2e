// The `npucache` command: one binary with subcommands.
#include <npucache/error.h>
#include <npucache/mpi.h>
#include <npucache/version.h>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "tools/commands.h"
#include "tools/plugin_path.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

namespace {

// Edit distance, for "did you mean".
std::size_t distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The first word that is not an option must be a subcommand: anything else
// is named, with the nearest command and the list, and is a usage error.
bool known_command(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return true;
  const std::string word = argv[1];
  std::vector<std::string> names;
  for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(s->get_name());
  if (std::find(names.begin(), names.end(), word) != names.end()) return true;
  std::string list, nearest;
  std::size_t best = 3;  // suggest only close words
  for (const auto& n : names) {
    list += (list.empty() ? "" : ", ") + n;
    if (const std::size_t d = distance(word, n); d < best) {
      best = d;
      nearest = n;
    }
  }
  std::fprintf(stderr,
               "npucache: error: unknown command '%s'%s\nthe commands are: %s (npucache --help describes them)\n",
               word.c_str(), nearest.empty() ? "" : ("; did you mean '" + nearest + "'?").c_str(), list.c_str());
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"npucache: compile-cache coordinator for multi-card inference"};
  // --help shows each option's default (inherited by the subcommands).
  app.option_defaults()->always_capture_default();
  app.require_subcommand(1);
  app.set_version_flag("--version", npucache::version());
  // Like --version: answers and exits without a subcommand (a plugin that
  // cannot be found is an npucache::Error, exit status 1).
  const auto print_plugin_dir = [] {
    std::printf("%s\n", npucache::tools::hdf5_plugin_dir().c_str());
    throw CLI::Success();
  };
  app.add_flag_callback("--plugin-path", print_plugin_dir,
                        "Print the folder of the HDF5 zstd filter plugin (for HDF5_PLUGIN_PATH) and exit")
      ->configurable(false);
  npucache::tools::add_generate_command(app);
  npucache::tools::add_cache_commands(app);
  npucache::tools::add_job_commands(app);
  npucache::tools::add_remote_commands(app);
  if (!known_command(app, argc, argv)) return 2;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are successes; every usage error exits 2.
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const npucache::ConfigError& e) {
    // A bad argument or setting: the usage error status, as CLI11's.
    std::fprintf(stderr, "npucache: error: %s\n", e.what());
    if (npucache::MpiSession::initialized() && npucache::MpiSession::world_size() > 1) npucache::MpiSession::abort(2);
    return 2;
  } catch (const npucache::Error& e) {
    std::fprintf(stderr, "npucache: error: %s\n", e.what());
    // Under mpirun a failed rank must not leave the others waiting.
    if (npucache::MpiSession::initialized() && npucache::MpiSession::world_size() > 1) npucache::MpiSession::abort(1);
    return 1;
  } catch (const std::exception& e) {
    // Anything else (out of memory, a library's error) is a failed command
    // too: status 1, as the man page's EXIT STATUS says, never an abort.
    std::fprintf(stderr, "npucache: error: %s\n", e.what());
    if (npucache::MpiSession::initialized() && npucache::MpiSession::world_size() > 1) npucache::MpiSession::abort(1);
    return 1;
  }
  return npucache::tools::exit_code();
}
