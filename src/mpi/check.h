// Checking MPI return codes (private to src/mpi): a failure becomes a
// CommError carrying MPI's error string.
#pragma once

#include <npucache/error.h>

#include <mpi.h>

#include <string>

namespace npucache::mpi {

inline void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw CommError(std::string(what) + " failed: " + std::string(msg, static_cast<std::size_t>(len)));
}

}  // namespace npucache::mpi
