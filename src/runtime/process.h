// What the runtime knows of the job its process belongs to, for the one
// check that needs it: a collective run with no communicator set on its
// thread, in a process that is one of several MPI ranks, would silently
// compute this rank's partial result. The job's size comes from the
// process context (process::world(), which the MPI layer feeds; the
// runtime includes no MPI).
#pragma once

#include <npucache/runtime/communicator.h>

#include <string_view>

namespace npucache::runtime {

// Throws CommError telling what to call when `comm` is the default
// single-process communicator of a thread that never set one, and the
// process is one of several ranks. `what` names the operation.
void check_communicator_set(const Communicator* comm, std::string_view what);

}  // namespace npucache::runtime
