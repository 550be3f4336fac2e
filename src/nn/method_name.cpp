// Naming a member function from its pointer (include/npucache/trace.h):
// the function the pointer calls on this object (a virtual one resolved
// through the object's vtable, as the Itanium C++ ABI lays pointers to
// member functions out), its symbol (the dynamic symbol table, else the
// ELF symbol table of the binary or library defining it), demangled, and
// the unqualified name taken from it.
#include <npucache/trace.h>

#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>

namespace npucache::detail {
namespace {

// The function a pointer to member function calls on `object`, or null
// when the pointer's layout is not the Itanium ABI's.
const void* target_of(const void* object, const unsigned char* pmf, std::size_t size) {
  if (size != 2 * sizeof(std::ptrdiff_t)) return nullptr;
  std::ptrdiff_t ptr = 0, adj = 0;
  std::memcpy(&ptr, pmf, sizeof ptr);
  std::memcpy(&adj, pmf + sizeof ptr, sizeof adj);
  if ((ptr & 1) == 0) return reinterpret_cast<const void*>(ptr);
  // Virtual: ptr - 1 is the byte offset of the slot in the vtable.
  const char* self = static_cast<const char*>(object) + adj;
  const char* vtable = *reinterpret_cast<const char* const*>(self);
  return *reinterpret_cast<const void* const*>(vtable + (ptr - 1));
}

// The mangled name of the function at `fn` from the ELF symbol table of the
// file `path` loaded at `base` (ET_DYN objects hold offsets, ET_EXEC
// absolute addresses).
std::string from_symtab(const char* path, uintptr_t bias, const void* fn) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr))) {
    ::close(fd);
    return {};
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return {};
  std::unique_ptr<void, std::function<void(void*)>> unmap(map, [size](void* p) { ::munmap(p, size); });
  const auto* bytes = static_cast<const unsigned char*>(map);
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(bytes);
  if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64) return {};
  if (eh->e_shoff == 0 || eh->e_shentsize != sizeof(Elf64_Shdr) ||
      eh->e_shoff + static_cast<uint64_t>(eh->e_shnum) * sizeof(Elf64_Shdr) > size)
    return {};
  const auto* sh = reinterpret_cast<const Elf64_Shdr*>(bytes + eh->e_shoff);
  // Symbol values are link-time addresses; the load bias maps them.
  const uint64_t want = reinterpret_cast<uint64_t>(fn) - bias;
  for (unsigned i = 0; i < eh->e_shnum; ++i) {
    if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum) continue;
    const Elf64_Shdr& strtab = sh[sh[i].sh_link];
    if (sh[i].sh_offset + sh[i].sh_size > size || strtab.sh_offset + strtab.sh_size > size) continue;
    const auto* syms = reinterpret_cast<const Elf64_Sym*>(bytes + sh[i].sh_offset);
    const std::size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
    for (std::size_t k = 0; k < n; ++k)
      if (ELF64_ST_TYPE(syms[k].st_info) == STT_FUNC && syms[k].st_value == want && syms[k].st_name < strtab.sh_size) {
        const char* name = reinterpret_cast<const char*>(bytes + strtab.sh_offset + syms[k].st_name);
        return std::string(name, strnlen(name, strtab.sh_size - syms[k].st_name));
      }
  }
  return {};
}

std::string demangle(const std::string& mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && d ? std::string(d.get()) : mangled;
}

// "(anonymous namespace)::Model<int>::prompt(Arg const&) const" -> "prompt":
// the parameter list is the last top-level parenthesised group; the name
// is what stands between it and the last top-level "::" before it.
std::string unqualified(const std::string& demangled) {
  std::size_t end = demangled.rfind(')');
  if (end == std::string::npos) return {};
  int depth = 0;
  std::size_t open = std::string::npos;
  for (std::size_t i = end + 1; i-- > 0;) {
    const char c = demangled[i];
    if (c == ')' || c == '>')
      ++depth;
    else if (c == '(' || c == '<') {
      if (--depth == 0 && c == '(') {
        open = i;
        break;
      }
    }
  }
  if (open == std::string::npos) return {};
  std::size_t start = 0;
  depth = 0;
  for (std::size_t i = open; i-- > 0;) {
    const char c = demangled[i];
    if (c == ')' || c == '>')
      ++depth;
    else if (c == '(' || c == '<')
      --depth;
    else if (depth == 0 && c == ':' && i > 0 && demangled[i - 1] == ':') {
      start = i + 1;
      break;
    }
  }
  std::string name;
  for (std::size_t i = start; i < open; ++i) {
    const char c = demangled[i];
    name += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  }
  return name;
}

struct ObjectOf {
  const void* address;
  std::string path;  // empty: not found
  uintptr_t bias = 0;
};

int find_object(dl_phdr_info* info, std::size_t, void* data) {
  auto* o = static_cast<ObjectOf*>(data);
  const auto addr = reinterpret_cast<uintptr_t>(o->address);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_LOAD && addr >= info->dlpi_addr + ph.p_vaddr &&
        addr < info->dlpi_addr + ph.p_vaddr + ph.p_memsz) {
      // The main program has no name here: read the running image.
      o->path = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : "/proc/self/exe";
      o->bias = info->dlpi_addr;
      return 1;
    }
  }
  return 0;
}

}  // namespace

MemberFunctionName member_function_name(const void* object, const unsigned char* pmf, std::size_t size) {
  MemberFunctionName out;
  const void* fn = target_of(object, pmf, size);
  if (fn == nullptr) return out;
  std::string mangled;
  Dl_info info{};
  if (::dladdr(fn, &info) != 0 && info.dli_sname && info.dli_saddr == fn) mangled = info.dli_sname;
  if (mangled.empty()) {
    ObjectOf o{fn, {}, 0};
    dl_iterate_phdr(find_object, &o);
    if (!o.path.empty()) mangled = from_symtab(o.path.c_str(), o.bias, fn);
  }
  if (mangled.empty()) return out;
  out.symbol = demangle(mangled);
  out.name = unqualified(out.symbol);
  return out;
}

std::string short_type_name(const std::string& qualified) {
  std::string name = qualified;
  if (auto t = name.find('<'); t != std::string::npos) name = name.substr(0, t);
  if (auto p = name.rfind("::"); p != std::string::npos) name = name.substr(p + 2);
  return name;
}

}  // namespace npucache::detail
