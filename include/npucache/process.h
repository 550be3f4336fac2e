// npucache's process context: what a program using npucache has once per
// process -- the statistics' counters, the background commits of entries
// the remote tier served, the tuning table, the remote connections, the
// stores it opened. A program that does nothing gets one made on first use
// and flushed at exit (a normal return from main, or exit(): statistics
// written, background commits finished); it is never destroyed, so other
// threads still in a call when exit() runs go on safely.
//
// A program that wants it finished at a point of its own owns one:
//
//   int main() {
//     npucache::ProcessContext npucache_context;  // current until it ends
//     ...                                         // cache_compile, calls
//   }  // statistics written, background commits finished, here
//
// Only one thread makes and ends a ProcessContext, while no other thread
// of the program uses npucache (npucache's own background commits work in
// the context that queued them). Contexts may end in any order: the latest
// one still alive, else the program's, is current again. A compiled method
// made under one keeps working after it ended, in the context current
// then.
#pragma once

#include <npucache/export.h>

namespace npucache {

class NPUCACHE_API ProcessContext {
 public:
  ProcessContext();
  // flush(), then every process-wide object of npucache is destroyed; the
  // context that was current before is current again.
  ~ProcessContext();
  ProcessContext(const ProcessContext&) = delete;
  ProcessContext& operator=(const ProcessContext&) = delete;

  // Writes the statistics' counters to each cache directory's stats.json
  // and waits for background commits, now.
  void flush();

 private:
  void* scope_;
};

// flush() of the current context (the program's own, or the innermost
// ProcessContext).
NPUCACHE_API void flush_process_context();

}  // namespace npucache
