// The `npucache` command: one binary with subcommands.
#include <npucache/error.h>
#include <npucache/mpi.h>
#include <npucache/version.h>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "tools/commands.h"
#include "tools/plugin_path.h"

#include <cstdio>

int main(int argc, char** argv) {
  CLI::App app{"npucache: compile-cache coordinator for multi-card inference"};
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
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
  }
  return npucache::tools::exit_code();
}
