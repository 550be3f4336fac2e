// Region files from the objects that come into a store from elsewhere
// (docs/ARCHITECTURE.md, "Regions in the store"). A compile stores the
// regions it compiles in its own store (region_library.h); an object that
// reaches another store (received from a rank of another store, read from
// the remote tier, imported from a bundle) holds the same regions'
// programs, and copying them into regions/ there lets a later job of
// another layout or depth on that store compile no region either.
//
// What a copy inherits: the file is written as a compile would write it
// (format::encode_region_file checks that each region is the one its
// validity names: the body's hash and the config's), checked again by
// put_region, under the store's writing lock (a sweep is waited for at
// most RegionLibrary::kStoreWaitSeconds, once for all of an object's
// regions: past it they are not copied, said at INFO); a file already there is left as
// it is (nothing is read or marked used). Only for the default
// decompositions: a region file records the hash of its body after
// decomposition, and a custom table is known where the object arrives by
// its name alone, so its regions are left to the compiles that use it.
// The caller decides that the object is trusted as a compile of this
// store would be: compiled in this job, read from another store of the
// job whose regions/ holds the same regions (regions_held: a store may
// hold an unsigned remote's program without them), imported (its entries'
// settings checked against its own trace: cache/own_key.h), or read from
// a signed remote tier; never an unsigned remote's program, which is a
// claim.
//
// Errors: none escape; a region that cannot be copied is logged at debug
// level (losing it costs one compile of it, never an entry).
#pragma once

#include "compiler/compiled_graph.h"
#include "format/records.h"
#include "format/region_file.h"
#include "storage/store.h"

#include <optional>

namespace npucache::cache {

// The regions of `g` (an object's program, decoded) that `s` lacks,
// stored under `validity` (the method's: region empty, the config taken
// from `g`); returns how many were stored.
int copy_regions(const storage::Store& s, const compiler::CompiledGraph& g, format::RegionValidity validity);

// Whether `s`'s regions/ holds every region of `g` under `validity` (as
// copy_regions names them), each intact and the same as `g`'s: the same
// program and the same autotune decisions (as `g` runs: an archived
// object's region, without its program, is lowered from its optimized body
// and decisions as its loader lowers it, and that body is the file's too). A store vouches so for the regions of a
// program it holds before they are copied into another store: its object
// alone may be a claim (an unsigned remote's), its regions/ holds only its
// own compiles and trusted copies. True for a `g` without regions.
// Throws CacheRefused (a link, a file of another user); a damaged or
// unreadable region file vouches for nothing.
// Each file is compared as `g`'s trace names the region's symbols (a
// compile that took the file renamed it so). `mark_used`: as read_region.
bool regions_held(const storage::Store& s, const compiler::CompiledGraph& g, format::RegionValidity validity,
                  bool mark_used = true);

// What copy_regions reads of a program: its config, its regions and
// their bodies, without the method's own graph and program (kept by a
// caller until the copy, after the program itself is gone).
compiler::CompiledGraph regions_of(const compiler::CompiledGraph& g);

// What a region of an entry's object is valid for, from the entry's
// components (format/keys.h): runtime version, decompositions, dynamic
// and format version (the config is the object's own); nullopt when one
// is missing or the entry is of another format (its regions are not this
// build's to copy).
std::optional<format::RegionValidity> region_validity_of(const format::Components& c);

}  // namespace npucache::cache
