// The fuzz targets without libFuzzer: runs every file of the given folders (or the given files)
// through the target once, as the regular build's ctest does with each seed corpus, so that the
// targets build with any compiler and every input a fuzzer ever found stays fixed. An exception
// that escapes the target fails with the file that caused it.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    if (fs::is_directory(argv[i])) {
      for (const auto& e : fs::recursive_directory_iterator(argv[i])) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
    } else {
      files.emplace_back(argv[i]);
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::cerr << "usage: " << argv[0] << " CORPUS_DIR_OR_FILE...: no input files found\n";
    return 2;
  }
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) {
      std::cerr << f.string() << ": cannot be read\n";
      return 2;
    }
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    try {
      LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    } catch (const std::exception& e) {
      std::cerr << f.string() << ": the target threw: " << e.what() << "\n";
      return 1;
    }
  }
  // stderr: the targets silence stdout.
  std::fprintf(stderr, "%zu inputs ran without a crash\n", files.size());
  return 0;
}
