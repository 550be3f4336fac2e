# How a test is declared (tests/CMakeLists.txt, examples/CMakeLists.txt).
#
# Every test carries exactly one cost label, declared where the test is:
#   fast       in-process, every case done in a few seconds (scripts/check_tests.py
#              fails a `fast` test that took longer in the plain build)
#   slow       one host, no mpiexec: spawns processes, or takes longer
#   mpi        ranks under mpiexec
#   install    installs the package into a scratch prefix and uses it
#   multihost  ranks across simulated hosts (network namespaces; root)
#   stress     writers, admin commands and kills on one cache against an oracle
# and any number of selection labels:
#   asan       also run in the ASan+UBSan build of .ci/run
#   concurrent the concurrent layers: also run in the TSan build of .ci/run
#
# NPUCACHE_TEST_LABELS (a ;-list, empty for all) keeps only the tests that
# carry one of the labels: a sanitizer build defines, and so compiles, only
# the programs of the tests it runs (scripts/test.sh --labels).
set(NPUCACHE_COST_LABELS fast slow mpi install multihost stress)
set(NPUCACHE_SELECTION_LABELS asan concurrent)
set(NPUCACHE_TEST_LABELS "" CACHE STRING
    "Only the tests carrying one of these labels are defined and built (empty: every test)")

# Fails the configure step unless `labels` hold exactly one cost label and
# nothing unknown.
function(npucache_check_labels what labels)
  set(costs "")
  foreach(l ${labels})
    if(l IN_LIST NPUCACHE_COST_LABELS)
      list(APPEND costs ${l})
    elseif(NOT l IN_LIST NPUCACHE_SELECTION_LABELS)
      message(FATAL_ERROR "test ${what}: unknown label '${l}' (cost labels: ${NPUCACHE_COST_LABELS}; "
                          "selection labels: ${NPUCACHE_SELECTION_LABELS}; cmake/Tests.cmake)")
    endif()
  endforeach()
  list(LENGTH costs n)
  if(NOT n EQUAL 1)
    message(FATAL_ERROR "test ${what}: needs exactly one cost label of ${NPUCACHE_COST_LABELS}, "
                        "has '${costs}' (cmake/Tests.cmake)")
  endif()
endfunction()

# out = TRUE when a test of `labels` is kept under NPUCACHE_TEST_LABELS.
function(npucache_labels_selected out labels)
  set(keep FALSE)
  if(NOT NPUCACHE_TEST_LABELS)
    set(keep TRUE)
  endif()
  foreach(l ${labels})
    if(l IN_LIST NPUCACHE_TEST_LABELS)
      set(keep TRUE)
    endif()
  endforeach()
  set(${out} ${keep} PARENT_SCOPE)
endfunction()

# A program the tests run (a worker process, a fuzzer): built with every
# test, and under NPUCACHE_TEST_LABELS only when a kept test NEEDS it.
function(npucache_test_program name)
  if(NPUCACHE_TEST_LABELS)
    add_executable(${name} EXCLUDE_FROM_ALL ${ARGN})
  else()
    add_executable(${name} ${ARGN})
  endif()
endfunction()

# The programs the kept tests need, built by `all` (npucache_finish_tests).
function(npucache_need_programs)
  set_property(GLOBAL APPEND PROPERTY NPUCACHE_NEEDED_PROGRAMS ${ARGN})
endfunction()

# npucache_add_test(NAME name LABELS cost [selection...] [NEEDS target...]
#                   [PROPERTIES prop value...] [ENV var=value...] COMMAND ...)
# A test run by a command (a script, a program with arguments); TIMEOUT is
# required among PROPERTIES, so no test waits on ctest's default.
function(npucache_add_test)
  cmake_parse_arguments(T "" "NAME" "LABELS;NEEDS;PROPERTIES;ENV;COMMAND" ${ARGN})
  npucache_check_labels(${T_NAME} "${T_LABELS}")
  npucache_labels_selected(keep "${T_LABELS}")
  if(NOT keep)
    return()
  endif()
  if(NOT "TIMEOUT" IN_LIST T_PROPERTIES)
    message(FATAL_ERROR "test ${T_NAME}: give it a TIMEOUT among PROPERTIES")
  endif()
  add_test(NAME ${T_NAME} COMMAND ${T_COMMAND})
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" ${T_PROPERTIES})
  if(T_ENV)
    set_tests_properties(${T_NAME} PROPERTIES ENVIRONMENT "${T_ENV}")
  endif()
  if(T_NEEDS)
    npucache_need_programs(${T_NEEDS})
  endif()
endfunction()

# Creates the target that builds the programs kept tests need; call once,
# after every test is declared.
function(npucache_finish_tests)
  get_property(needed GLOBAL PROPERTY NPUCACHE_NEEDED_PROGRAMS)
  if(needed)
    list(REMOVE_DUPLICATES needed)
    add_custom_target(npucache_test_programs ALL)
    add_dependencies(npucache_test_programs ${needed})
  endif()
endfunction()
