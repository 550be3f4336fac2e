// include/npucache/process.h over the process context (context.h).
#include <npucache/process.h>

#include "process/context.h"

namespace npucache {

ProcessContext::ProcessContext() : scope_(new process::Context::Scope()) {}

ProcessContext::~ProcessContext() { delete static_cast<process::Context::Scope*>(scope_); }

void ProcessContext::flush() { static_cast<process::Context::Scope*>(scope_)->context().flush(); }

void flush_process_context() { process::Context::current().flush(); }

}  // namespace npucache
