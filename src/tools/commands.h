// Subcommands of the `npucache` command; each registers itself on the app
// and records its exit status.
#pragma once

#include <CLI/CLI.hpp>

namespace npucache::tools {

void add_generate_command(CLI::App& app);
void add_cache_commands(CLI::App& app);
void add_job_commands(CLI::App& app);

int exit_code();
void set_exit_code(int code);

}  // namespace npucache::tools
