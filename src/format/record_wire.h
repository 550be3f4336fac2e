// Entries and objects in npucache's bounded binary encoding
// (compiler/wire.h), as bundles and the remote tier's values carry them
// (docs/FORMAT.md, "The Mega-Cache bundle"). Reading checks every length
// against what remains; it does not check what the fields mean (callers
// validate names, sizes and checksums).
#pragma once

#include "compiler/wire.h"
#include "format/records.h"

namespace npucache::cache {

void write_producer(compiler::ByteWriter& w, const Producer& p);
Producer read_producer(compiler::ByteReader& r);
void write_entry(compiler::ByteWriter& w, const EntryRecord& e);
EntryRecord read_entry(compiler::ByteReader& r);
void write_object(compiler::ByteWriter& w, const ObjectRecord& o);
ObjectRecord read_object(compiler::ByteReader& r);

}  // namespace npucache::cache
