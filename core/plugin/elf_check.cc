#include "core/plugin/elf_check.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <algorithm>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ddplab {

absl::Status CheckElfWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  auto bad = [&](const std::string& why) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": not a whole ELF shared library (", why, ")"));
  };
  Elf64_Ehdr header{};
  in.seekg(0);
  if (size < sizeof(header) || !in.read(reinterpret_cast<char*>(&header), sizeof(header))) {
    return bad(absl::StrCat(size, " bytes, shorter than an ELF header"));
  }
  if (header.e_ident[EI_MAG0] != ELFMAG0 || header.e_ident[EI_MAG1] != ELFMAG1 || header.e_ident[EI_MAG2] != ELFMAG2 ||
      header.e_ident[EI_MAG3] != ELFMAG3) {
    return bad("no ELF magic");
  }
  if (header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_type != ET_DYN) return bad("not a 64-bit shared object");
  const uint64_t programs = header.e_phoff + uint64_t{header.e_phnum} * header.e_phentsize;
  const uint64_t sections = header.e_shoff + uint64_t{header.e_shnum} * header.e_shentsize;
  if (header.e_phentsize != sizeof(Elf64_Phdr) || programs > size || sections > size) {
    return bad(absl::StrCat("truncated: its headers reach byte ", std::max(programs, sections), " of ", size));
  }
  std::vector<Elf64_Phdr> segments(header.e_phnum);
  in.seekg(static_cast<std::streamoff>(header.e_phoff));
  if (!in.read(reinterpret_cast<char*>(segments.data()),
               static_cast<std::streamsize>(segments.size() * sizeof(Elf64_Phdr)))) {
    return bad("unreadable program headers");
  }
  for (const Elf64_Phdr& s : segments) {
    if (s.p_type == PT_LOAD && s.p_offset + s.p_filesz > size) {
      return bad(absl::StrCat("truncated: a segment reaches byte ", s.p_offset + s.p_filesz, " of ", size));
    }
  }
  return absl::OkStatus();
}

bool IsFunction(void* address) {
  Dl_info info{};
  void* entry = nullptr;  // the symbol's ElfW(Sym)
  if (dladdr1(address, &info, &entry, RTLD_DL_SYMENT) == 0 || entry == nullptr) return false;
  const auto* symbol = static_cast<const ElfW(Sym)*>(entry);
  return ELF64_ST_TYPE(symbol->st_info) == STT_FUNC || ELF64_ST_TYPE(symbol->st_info) == STT_GNU_IFUNC;
}

}  // namespace ddplab
