// The phases of the coordinator's protocol (coordinated_source.h), named
// in errors, warnings and the transport's test seam (transport.h).
//   arrival   every rank checks its own entry; one all-reduce: the same
//             method everywhere, all hit, anyone failed
//   plan      ranks that miss trace; the key all-gather; the plan; the
//             remote tier's reads
//   compile   owners compile or read the program
//   exchange  the program travels along the routes of its key group
//   load      each rank prepares what it received
//   persist   each store's writer commits the entries of its ranks
#pragma once

namespace npucache::coord {

enum class Phase { arrival, plan, compile, exchange, load, persist };

// "arrival", ...
const char* phase_name(Phase p);
// What a rank does in the phase, for "rank 3 failed in phase compile
// (compiling the method): ...".
const char* phase_work(Phase p);

}  // namespace npucache::coord
