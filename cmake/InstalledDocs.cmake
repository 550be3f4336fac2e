# The installed copy of a document (README.md, docs/GUIDE.md): the source
# text with what holds only in the source tree replaced by what holds in the
# installation, so that the installed text names installed places only.
#   cmake -DIN=README.md -DOUT=<file> -DPREFIX=<install prefix>
#         -DBINDIR= -DDATADIR= -DDOCDIR= -DINCLUDEDIR= (relative to PREFIX or absolute)
#         -P InstalledDocs.cmake
# In the source text:
#   <!-- source-only -->...<!-- /source-only -->   dropped (may span lines)
#   <!-- installed TEXT -->                         TEXT kept (may span lines);
#                                                    @PREFIX@, @BINDIR@, @DATADIR@,
#                                                    @DOCDIR@, @INCLUDEDIR@ are the
#                                                    absolute install folders
# and then, everywhere: `launch/warmup.sh` -> `npucache-warmup`, `launch/infer.sh`
# -> `npucache-infer`, `build/src/npucache` -> `npucache`, `configs/` -> the
# installed configs, `examples/` -> the installed examples, `include/npucache/`
# -> the installed headers, docs/GUIDE.md -> GUIDE.md (installed next to it).
# tests/install/hidden_trees.sh checks that no source-tree path is left.
cmake_minimum_required(VERSION 3.20)
foreach(v IN ITEMS IN OUT PREFIX BINDIR DATADIR DOCDIR INCLUDEDIR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "InstalledDocs.cmake needs -D${v}=...")
  endif()
endforeach()
foreach(v BINDIR DATADIR DOCDIR INCLUDEDIR)
  if(NOT IS_ABSOLUTE "${${v}}")
    set(${v} "${PREFIX}/${${v}}")
  endif()
endforeach()
file(READ "${IN}" text)

# Drops every <!-- source-only --> ... <!-- /source-only --> block.
set(open "<!-- source-only -->")
set(close "<!-- /source-only -->")
while(TRUE)
  string(FIND "${text}" "${open}" at)
  if(at EQUAL -1)
    break()
  endif()
  string(SUBSTRING "${text}" 0 ${at} head)
  string(SUBSTRING "${text}" ${at} -1 rest)
  string(FIND "${rest}" "${close}" end)
  if(end EQUAL -1)
    message(FATAL_ERROR "${IN}: a '${open}' without its '${close}'")
  endif()
  string(LENGTH "${close}" n)
  math(EXPR end "${end} + ${n}")
  string(SUBSTRING "${rest}" ${end} -1 rest)
  # A block that filled whole lines leaves no empty line behind.
  if(head MATCHES "\n$" AND rest MATCHES "^\n")
    string(SUBSTRING "${rest}" 1 -1 rest)
  endif()
  set(text "${head}${rest}")
endwhile()

# Unwraps every <!-- installed ... -->.
set(open "<!-- installed")
while(TRUE)
  string(FIND "${text}" "${open}" at)
  if(at EQUAL -1)
    break()
  endif()
  string(SUBSTRING "${text}" 0 ${at} head)
  string(LENGTH "${open}" n)
  math(EXPR body_at "${at} + ${n}")
  string(SUBSTRING "${text}" ${body_at} -1 rest)
  string(FIND "${rest}" "-->" end)
  if(end EQUAL -1)
    message(FATAL_ERROR "${IN}: a '${open}' without its '-->'")
  endif()
  string(SUBSTRING "${rest}" 0 ${end} body)
  math(EXPR end "${end} + 3")
  string(SUBSTRING "${rest}" ${end} -1 rest)
  # One space or line break after the opening and before the closing belongs to the markup.
  if(body MATCHES "^[ \n]")
    string(SUBSTRING "${body}" 1 -1 body)
  endif()
  if(body MATCHES "[ \n]$")
    string(LENGTH "${body}" n)
    math(EXPR n "${n} - 1")
    string(SUBSTRING "${body}" 0 ${n} body)
  endif()
  set(text "${head}${body}${rest}")
endwhile()

string(REPLACE "launch/warmup.sh" "npucache-warmup" text "${text}")
string(REPLACE "launch/infer.sh" "npucache-infer" text "${text}")
string(REPLACE "build/src/npucache" "npucache" text "${text}")
string(REPLACE "`configs/" "`${DATADIR}/npucache/configs/" text "${text}")
string(REPLACE " configs/" " ${DATADIR}/npucache/configs/" text "${text}")
string(REPLACE "`examples/" "`${DOCDIR}/examples/" text "${text}")
string(REPLACE "`include/npucache/" "`${INCLUDEDIR}/npucache/" text "${text}")
string(REPLACE "[docs/GUIDE.md](docs/GUIDE.md)" "[GUIDE.md](GUIDE.md)" text "${text}")
string(REPLACE "docs/GUIDE.md" "GUIDE.md" text "${text}")
foreach(v PREFIX BINDIR DATADIR DOCDIR INCLUDEDIR)
  string(REPLACE "@${v}@" "${${v}}" text "${text}")
endforeach()
file(WRITE "${OUT}" "${text}")
