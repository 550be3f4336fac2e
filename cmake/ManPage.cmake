# Writes the npucache(1) man page from the command's own help, so the page
# lists exactly the options and subcommands the binary has:
#   cmake -DEXE=<npucache> -DOUT=<npucache.1> -DVERSION=<x.y.z> -DPLUGINDIR=<dir> -P ManPage.cmake
# The top-level --help and each subcommand's --help (the subcommands are
# read from the "Subcommands:" list) become preformatted sections; the rest
# (description, environment, files) is written here.
foreach(v EXE OUT VERSION PLUGINDIR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "ManPage.cmake needs -D${v}=...")
  endif()
endforeach()

# `npucache <args> --help`, with the executable's path shown as "npucache".
function(help out)
  execute_process(COMMAND ${EXE} ${ARGN} --help RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${EXE} ${ARGN} --help failed (${rc}): ${err}")
  endif()
  string(REPLACE "${EXE}" "npucache" text "${text}")
  string(STRIP "${text}" text)
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# Text for roff: backslashes and hyphens escaped, lines that would start a
# request (. or ') protected.
function(roff out text)
  string(REPLACE "\\" "\\e" text "${text}")
  string(REPLACE "-" "\\-" text "${text}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

help(top)
string(FIND "${top}" "Subcommands:" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${EXE} --help lists no subcommands:\n${top}")
endif()
string(SUBSTRING "${top}" ${at} -1 listing)
string(REGEX MATCHALL "\n  [a-z][a-z0-9-]*" subs "${listing}")

roff(top_roff "${top}")
set(page ".TH NPUCACHE 1 \"\" \"npucache ${VERSION}\" \"User Commands\"
.SH NAME
npucache \\- compile\\-cache coordinator for multi\\-card inference
.SH SYNOPSIS
.B npucache
[\\fIOPTIONS\\fR] \\fISUBCOMMAND\\fR [\\fIARGS\\fR]
.br
.B npucache \\-\\-plugin\\-path
.br
.B npucache\\-warmup
\\-\\-tp \\fIT\\fR \\-\\-pp \\fIP\\fR [\\fIOPTIONS\\fR]
.br
.B npucache\\-infer
\\-\\-tp \\fIT\\fR \\-\\-pp \\fIP\\fR [\\fIOPTIONS\\fR]
.SH DESCRIPTION
npucache traces, compiles and caches the methods of models run on a
(simulated) multi\\-device NPU, and coordinates the ranks of an MPI job so
that each unique graph is compiled once.
The \\fBnpucache\\fR command runs eager generation, the multi\\-rank warmup
and inference jobs (under \\fBmpirun\\fR; \\fBnpucache\\-warmup\\fR and
\\fBnpucache\\-infer\\fR start them), and inspects and manages cache
directories.
A cache directory defaults to \\fB\\%$NPUCACHE_CACHE_DIR\\fR, else \\fI.npucache\\fR.
.SH OPTIONS
.nf
${top_roff}
.fi
.PP
\\fB\\-\\-plugin\\-path\\fR prints the folder holding the HDF5 zstd filter
plugin (libh5zzstd.so) of this npucache, found relative to the executable
(the installed layout, else the build tree's), for
.BR HDF5_PLUGIN_PATH ,
so that HDF5's own tools decode a cache:
.PP
.RS
.nf
export HDF5_PLUGIN_PATH=$(npucache \\-\\-plugin\\-path)
h5dump \\-d /<model_info>/<func>/compiled_module <cache_dir>/<model_info>.h5
.fi
.RE
.SH SUBCOMMANDS
")
foreach(s ${subs})
  string(STRIP "${s}" s)
  help(sub ${s})
  roff(sub_roff "${sub}")
  string(APPEND page ".SS ${s}\n.nf\n${sub_roff}\n.fi\n")
endforeach()
string(APPEND page ".SH ENVIRONMENT
.TP
.B NPUCACHE_CACHE_DIR
default cache directory (default \\fI.npucache\\fR under the working directory)
.TP
.B NPUCACHE_LOG_LEVEL
trace, debug, info (default), warn, error, critical or off
.TP
.B NPUCACHE_METRICS_FILE
a file the process rewrites with its cache counters in Prometheus' text format (every \\fBNPUCACHE_METRICS_INTERVAL\\fR seconds, default 5, and at exit; rank 0 only in an MPI job)
.TP
.B NPUCACHE_REMOTE
the remote cache tier: redis://host:port[/db][?read\\-only&timeout=5s&connect\\-timeout=100ms&max\\-object=64M]
, redis+unix:///path or file:///shared/dir (a directory every host mounts); unset: none (\\fB\\-\\-remote\\fR overrides it)
.TP
.B NPUCACHE_REMOTE_PASSWORD
the remote's password
.TP
.B NPUCACHE_REMOTE_PASSWORD_FILE
a file holding the remote's password
.TP
.B NPUCACHE_SIM_DEVICES
devices of the simulated node (default 8)
.TP
.B NPUCACHE_SIM_DEVICE_MEMORY
memory per device, bytes or with a K/M/G suffix (default 4G)
.TP
.B NPUCACHE_SIM_RUNTIME_VERSION
the simulated runtime version (default 1.0.0); entries of another version are stale
.TP
.B NPUCACHE_SIM_LAUNCH_LATENCY_US
modelled extra host latency per kernel launch (default 0)
.TP
.B NPUCACHE_BIN
the npucache binary that npucache\\-warmup and npucache\\-infer run (default: the one next to them)
.SH FILES
.TP
.I <cache_dir>/<model_info>.h5
the index of one model: its entries at
/<model_info>/[world<W>global_rank<R>/]<func>, each with an external link
compiled_module to its object
.TP
.I <cache_dir>/objects/<graph_key>.h5
one compiled artifact (/compiled_module, zstd\\-compressed with HDF5 filter 32015)
.TP
.I <prefix>/")
roff(plugindir_roff "${PLUGINDIR}")
string(APPEND page "${plugindir_roff}/libh5zzstd.so
the HDF5 zstd filter plugin (printed by \\fBnpucache \\-\\-plugin\\-path\\fR)
.SH EXIT STATUS
.TP
.B 0
success (also \\fB\\-\\-help\\fR, \\fB\\-\\-version\\fR and \\fB\\-\\-plugin\\-path\\fR)
.TP
.B 1
a command failed (a missing entry, a damaged or unreadable file, a rank that
did not answer in time); \\fBverify\\fR found damage; \\fBinfer\\fR produced
other tokens than a single process; \\fBremote pull\\fR left entries out
.TP
.B 2
a usage error: a command line that does not parse (an unknown command,
option or value), an invalid option value or setting (a bad model config,
size, timeout or report path), or ranks of one job started with different
options
.PP
\\fBnpucache\\-warmup\\fR and \\fBnpucache\\-infer\\fR exit 2 for their own bad
options, with the status of \\fBnpucache\\fR \\fIjob\\fR \\fB\\-\\-check\\-args\\fR when
the job's arguments fail that check, and otherwise with mpirun's status (not 0
when a rank ended the job with 1 or 2).
.SH SEE ALSO
.BR h5dump (1),
.BR mpirun (1);
README.md and GUIDE.md in the documentation folder (share/doc/npucache),
the examples in its examples folder, the shipped model configs in
share/npucache/configs.
")
file(WRITE ${OUT}.tmp "${page}")
file(RENAME ${OUT}.tmp ${OUT})
