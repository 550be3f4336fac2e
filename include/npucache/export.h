// NPUCACHE_API: what libnpucache.so and libnpucache_models.so export.
//
// Both libraries are built with hidden visibility (-fvisibility=hidden,
// -fvisibility-inlines-hidden) and a linker version script
// (cmake/npucache.map, cmake/npucache_models.map): a symbol is exported
// only when its declaration in a public header carries NPUCACHE_API -- the
// classes (their members, vtables and type information, so an exception
// thrown by the library is caught by its type in the program) and the free
// functions the headers declare. Templates and inline functions of the
// headers are compiled into the program that uses them and carry none.
//
// NPUCACHE_LOCAL keeps a member of an exported class out of the export:
// what only the library's own code calls (a private helper, a member over
// internal types a program cannot use).
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define NPUCACHE_API __attribute__((visibility("default")))
#define NPUCACHE_LOCAL __attribute__((visibility("hidden")))
#else
#define NPUCACHE_API
#define NPUCACHE_LOCAL
#endif
