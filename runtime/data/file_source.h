// FileTokenSource: training tokens from a file, loaded whole into memory.
//   OpenTextFile(path):          every byte is a token (vocab 256).
//   OpenTokenFile(path, vocab):  little-endian uint16 token ids; an odd byte
//                                count is reported as "truncated", and an id
//                                >= vocab as an error naming the file and the
//                                byte offset of the bad id.
// Sample g of length len is the window starting at ((g + seed) * len) modulo
// (num_tokens - len + 1): consecutive samples tile the file, wrapping around.
// Immutable after opening; thread-safe.
#pragma once

#include <memory>
#include <vector>

#include "base/status.h"
#include "runtime/data/token_source.h"

namespace dt::rt {

class FileTokenSource : public TokenSource {
 public:
  static StatusOr<std::unique_ptr<FileTokenSource>> OpenTextFile(const std::string& path);
  static StatusOr<std::unique_ptr<FileTokenSource>> OpenTokenFile(const std::string& path, int vocab);
  // The same on a file's bytes, no file access (the fuzz harness
  // tests/fuzz/tokens_fuzz.cc); `path` names the source in errors.
  static StatusOr<std::unique_ptr<FileTokenSource>> FromTextBytes(const std::string& bytes,
                                                                  const std::string& path);
  static StatusOr<std::unique_ptr<FileTokenSource>> FromTokenBytes(const std::string& bytes,
                                                                   const std::string& path, int vocab);

  int vocab() const override { return vocab_; }
  int64_t num_tokens() const override { return static_cast<int64_t>(tokens_.size()); }
  void Sample(uint64_t seed, int64_t global_sample, int64_t len, int32_t* out) const override;
  std::string Describe() const override;

 private:
  FileTokenSource(std::string path, int vocab, std::vector<uint16_t> tokens)
      : path_(std::move(path)), vocab_(vocab), tokens_(std::move(tokens)) {}
  std::string path_;
  int vocab_;
  std::vector<uint16_t> tokens_;
};

}  // namespace dt::rt
