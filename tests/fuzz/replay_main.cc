// Replays fuzz inputs without libFuzzer: every file named on the command line,
// or found (one level) in a directory named there, goes through the harness's
// LLVMFuzzerTestOneInput once. ctest runs this over the checked-in corpora
// (tests/fuzz/corpus/<harness>/), so a fixed crash stays fixed. Exit 0 when
// every input ran (the parsers' own errors are expected and ignored), 2 on an
// unreadable argument; a crash is the failure being tested for.
#include <dirent.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

bool RunFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int ran = 0;
  for (int i = 1; i < argc; ++i) {
    struct stat st {};
    if (::stat(argv[i], &st) != 0) {
      std::fprintf(stderr, "replay: cannot read '%s'\n", argv[i]);
      return 2;
    }
    if (!S_ISDIR(st.st_mode)) {
      if (!RunFile(argv[i])) return 2;
      ++ran;
      continue;
    }
    std::vector<std::string> files;
    if (DIR* d = ::opendir(argv[i])) {
      while (dirent* e = ::readdir(d))
        if (e->d_name[0] != '.') files.push_back(std::string(argv[i]) + "/" + e->d_name);
      ::closedir(d);
    }
    for (const auto& f : files) {
      if (!RunFile(f)) {
        std::fprintf(stderr, "replay: cannot read '%s'\n", f.c_str());
        return 2;
      }
      ++ran;
    }
  }
  std::printf("replayed %d inputs\n", ran);
  return 0;
}
