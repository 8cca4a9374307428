#include "runtime/data/file_source.h"

#include <fstream>
#include <iterator>

#include "base/check.h"

namespace dt::rt {
namespace {

StatusOr<std::string> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("token file '" + path + "' cannot be opened; check the path given to --data");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return IoError("reading token file '" + path + "' failed");
  return bytes;
}

}  // namespace

StatusOr<std::unique_ptr<FileTokenSource>> FileTokenSource::OpenTextFile(const std::string& path) {
  DT_ASSIGN_OR_RETURN(std::string bytes, ReadAll(path));
  return FromTextBytes(bytes, path);
}

StatusOr<std::unique_ptr<FileTokenSource>> FileTokenSource::OpenTokenFile(const std::string& path,
                                                                          int vocab) {
  DT_ASSIGN_OR_RETURN(std::string bytes, ReadAll(path));
  return FromTokenBytes(bytes, path, vocab);
}

StatusOr<std::unique_ptr<FileTokenSource>> FileTokenSource::FromTextBytes(const std::string& bytes,
                                                                          const std::string& path) {
  if (bytes.empty()) return InvalidArgument("text file '" + path + "' is empty");
  std::vector<uint16_t> tokens(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) tokens[i] = static_cast<unsigned char>(bytes[i]);
  return std::unique_ptr<FileTokenSource>(new FileTokenSource(path, 256, std::move(tokens)));
}

StatusOr<std::unique_ptr<FileTokenSource>> FileTokenSource::FromTokenBytes(const std::string& bytes,
                                                                           const std::string& path, int vocab) {
  if (bytes.size() % 2 != 0)
    return InvalidArgument("token file '" + path + "' is truncated: " + std::to_string(bytes.size()) +
                           " bytes is not a whole number of uint16 token ids; re-export it");
  if (bytes.empty()) return InvalidArgument("token file '" + path + "' is empty");
  if (vocab < 1 || vocab > 65536)
    return InvalidArgument("token file '" + path + "': vocab " + std::to_string(vocab) +
                           " does not fit uint16 ids");
  std::vector<uint16_t> tokens(bytes.size() / 2);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const uint16_t id = static_cast<uint16_t>(static_cast<unsigned char>(bytes[2 * i]) |
                                              (static_cast<unsigned char>(bytes[2 * i + 1]) << 8));
    if (id >= vocab)
      return InvalidArgument("token file '" + path + "': id " + std::to_string(id) + " at byte offset " +
                             std::to_string(2 * i) + " is >= the model's vocab " + std::to_string(vocab) +
                             "; tokenize with the model's vocabulary");
    tokens[i] = id;
  }
  return std::unique_ptr<FileTokenSource>(new FileTokenSource(path, vocab, std::move(tokens)));
}

void FileTokenSource::Sample(uint64_t seed, int64_t global_sample, int64_t len, int32_t* out) const {
  const int64_t n = num_tokens();
  DT_CHECK_LE(len, n) << "sample of " << len << " tokens from '" << path_ << "' with only " << n;
  const uint64_t windows = static_cast<uint64_t>(n - len + 1);
  const uint64_t start =
      ((static_cast<uint64_t>(global_sample) + seed) % windows) * static_cast<uint64_t>(len) % windows;
  for (int64_t t = 0; t < len; ++t) out[t] = tokens_[start + t];
}

std::string FileTokenSource::Describe() const {
  return "file('" + path_ + "', " + std::to_string(tokens_.size()) + " tokens, vocab " +
         std::to_string(vocab_) + ")";
}

}  // namespace dt::rt
