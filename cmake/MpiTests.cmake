# How ctest runs MPI programs (tests/ and examples/): under mpiexec with
#   NPUCACHE_MPIEXEC_FLAGS   --oversubscribe with Open MPI (ranks beyond the core count)
#   NPUCACHE_MPI_ENV         the ENVIRONMENT of an MPI test: Open MPI's opt-in for
#                            root (harmless for other users), and no leak checking
#                            under ASan (Open MPI's dlopen'ed components leak at
#                            MPI_Finalize, in frames LSan cannot attribute)
#   NPUCACHE_MPIEXEC_VERSION mpiexec --version (which MPI this is)
set(NPUCACHE_MPI_ENV "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
if(NPUCACHE_SANITIZE STREQUAL "address")
  list(APPEND NPUCACHE_MPI_ENV "ASAN_OPTIONS=detect_leaks=0")
endif()
execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE NPUCACHE_MPIEXEC_VERSION ERROR_QUIET)
set(NPUCACHE_MPIEXEC_FLAGS "")
if(NPUCACHE_MPIEXEC_VERSION MATCHES "Open MPI")
  set(NPUCACHE_MPIEXEC_FLAGS --oversubscribe)
endif()
