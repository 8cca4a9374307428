#include "runtime/ckpt/ckpt_format.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>

#include "base/checked_write.h"
#include "runtime/ckpt/crc32.h"

namespace dt::rt {
namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "dtplan-checkpoint-1";
constexpr const char* kBlob = "tensors.bin";
constexpr const char* kManifest = "manifest.json";
constexpr const char* kManifestCrc = "manifest.crc32";

// The sidecar's text: the manifest's CRC-32 as 8 lower-case hex digits.
std::string CrcText(const std::string& manifest_text) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%08x\n", Crc32(manifest_text.data(), manifest_text.size()));
  return buf;
}

std::string ReadAll(const std::string& path, bool* ok) {
  std::ifstream in(path, std::ios::binary);
  *ok = static_cast<bool>(in);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A manifest integer: a JSON integer that int64 holds. Not nlohmann's
// get<int64_t>, which casts a float (undefined behaviour outside int64: found
// by tests/fuzz with "step": 1e300) and wraps an unsigned above 2^63 - 1.
std::optional<int64_t> ExactInt64(const json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  return std::nullopt;
}

std::string Errno(const std::string& what, const std::string& path) {
  return what + " '" + path + "' failed: " + std::strerror(errno);
}

// Writes bytes to path and fsyncs the file (every call checked; the
// DT_FAULT_WRITE_* test seam of base/checked_write.h applies).
Status WriteFileSynced(const std::string& path, const char* data, size_t n) {
  return WriteWholeFile(path, data, n, /*fsync=*/true);
}

Status SyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return IoError(Errno("opening directory", dir));
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return IoError(Errno("fsync of directory", dir));
  return Status::Ok();
}

}  // namespace

std::string StepDirName(int64_t step) { return "step-" + std::to_string(step); }

const NamedTensor* CheckpointContents::Find(const std::string& name) const {
  for (const NamedTensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

Status WriteCheckpoint(const std::string& root, const CheckpointContents& c) {
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) return IoError("creating checkpoint root '" + root + "' failed: " + ec.message());
  const std::string final_dir = (fs::path(root) / StepDirName(c.step)).string();
  const std::string tmp_dir = final_dir + ".tmp";
  // Litter of saves that died part-way (any step): never complete, never read.
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("step-", 0) == 0 && n.size() > 4 && n.compare(n.size() - 4, 4, ".tmp") == 0) {
      std::error_code rm;
      fs::remove_all(e.path(), rm);
    }
  }
  ec.clear();
  fs::remove_all(tmp_dir, ec);
  fs::create_directory(tmp_dir, ec);
  if (ec) return IoError("creating '" + tmp_dir + "' failed: " + ec.message());

  json tensors = json::array();
  std::string blob;
  for (const NamedTensor& t : c.tensors) {
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    if (numel != static_cast<int64_t>(t.data.size()))
      return Internal("checkpoint tensor '" + t.name + "': shape holds " + std::to_string(numel) +
                      " elements but data has " + std::to_string(t.data.size()));
    const size_t bytes = t.data.size() * sizeof(float);
    tensors.push_back({{"name", t.name},
                       {"shape", t.shape},
                       {"dtype", "f32"},
                       {"offset", blob.size()},
                       {"bytes", bytes},
                       {"crc32", Crc32(t.data.data(), bytes)}});
    blob.append(reinterpret_cast<const char*>(t.data.data()), bytes);
  }
  json manifest = {{"format", kFormat}, {"step", c.step},       {"meta", c.meta},
                   {"blob", kBlob},     {"blob_bytes", blob.size()}, {"tensors", tensors}};
  DT_RETURN_IF_ERROR(WriteFileSynced(tmp_dir + "/" + kBlob, blob.data(), blob.size()));
  const std::string text = manifest.dump(1);
  DT_RETURN_IF_ERROR(WriteFileSynced(tmp_dir + "/" + kManifest, text.data(), text.size()));
  const std::string crc = CrcText(text);
  DT_RETURN_IF_ERROR(WriteFileSynced(tmp_dir + "/" + kManifestCrc, crc.data(), crc.size()));
  DT_RETURN_IF_ERROR(SyncDir(tmp_dir));
  fs::remove_all(final_dir, ec);
  fs::rename(tmp_dir, final_dir, ec);
  if (ec) return IoError("renaming '" + tmp_dir + "' to '" + final_dir + "' failed: " + ec.message());
  DT_RETURN_IF_ERROR(SyncDir(root));
  const std::string latest = (fs::path(root) / "latest").string();
  const std::string pointer = StepDirName(c.step) + "\n";
  DT_RETURN_IF_ERROR(WriteFileSynced(latest + ".tmp", pointer.data(), pointer.size()));
  fs::rename(latest + ".tmp", latest, ec);
  if (ec) return IoError("renaming '" + latest + ".tmp' failed: " + ec.message());
  return SyncDir(root);
}

std::vector<int64_t> CompleteCheckpointSteps(const std::string& root) {
  std::vector<int64_t> steps;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("step-", 0) != 0 || !fs::exists(e.path() / kManifest)) continue;
    const std::string digits = n.substr(5);
    if (digits.empty() || digits.size() > 15 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    steps.push_back(std::stoll(digits));
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

Status PruneCheckpoints(const std::string& root, int keep) {
  if (keep < 1) return InvalidArgument("keep must be >= 1, is " + std::to_string(keep));
  std::vector<int64_t> steps = CompleteCheckpointSteps(root);
  auto latest = LatestCheckpointDir(root);
  const std::string newest = latest.ok() ? fs::path(*latest).filename().string() : "";
  int kept = 0;
  for (size_t i = steps.size(); i-- > 0;) {
    const std::string name = StepDirName(steps[i]);
    if (kept < keep || name == newest) {
      ++kept;
      continue;
    }
    std::error_code ec;
    fs::remove_all(fs::path(root) / name, ec);
    if (ec) return IoError("removing old checkpoint '" + (fs::path(root) / name).string() + "' failed: " + ec.message());
  }
  return Status::Ok();
}

StatusOr<std::string> LatestCheckpointDir(const std::string& root) {
  const std::string latest = (fs::path(root) / "latest").string();
  std::ifstream in(latest);
  if (!in) {
    // A lost pointer does not lose the checkpoints: the newest complete
    // step directory (renamed into place only after both files were synced).
    const std::vector<int64_t> steps = CompleteCheckpointSteps(root);
    if (steps.empty()) return NotFound("no checkpoint in '" + root + "': '" + latest + "' does not exist");
    const std::string dir = (fs::path(root) / StepDirName(steps.back())).string();
    std::fprintf(stderr, "dtrun: note: '%s' is missing; using the newest complete checkpoint '%s'\n", latest.c_str(),
                 dir.c_str());
    return dir;
  }
  std::string name;
  std::getline(in, name);
  if (name.empty() || name.find('/') != std::string::npos)
    return IoError("checkpoint pointer '" + latest + "' is corrupt (holds '" + name + "')");
  return (fs::path(root) / name).string();
}

StatusOr<CheckpointManifest> ParseManifest(const std::string& text, const std::string& crc_text,
                                           const std::string& manifest_path) {
  const fs::path dir = fs::path(manifest_path).parent_path();
  if (crc_text != CrcText(text))
    return IoError("checkpoint manifest '" + manifest_path + "' fails its CRC-32 check against '" +
                   (dir / kManifestCrc).string() +
                   "' (edited or corrupt); restore the checkpoint or load an older step");
  json manifest = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (manifest.is_discarded() || !manifest.is_object())
    return IoError("checkpoint manifest '" + manifest_path + "' is not valid JSON");
  CheckpointManifest m;
  try {
    if (manifest.value("format", "") != kFormat)
      return IoError("'" + manifest_path + "' is not a dtplan checkpoint manifest (format '" +
                     manifest.value("format", "") + "', expected '" + kFormat + "')");
    for (const char* key : {"step", "blob_bytes"}) {
      const std::optional<int64_t> v = ExactInt64(manifest.at(key));
      if (!v)
        return IoError("checkpoint manifest '" + manifest_path + "' field '" + key + "' is " +
                       manifest.at(key).dump() + ", not a 64-bit integer; restore the checkpoint or load an older step");
      (std::string(key) == "step" ? m.step : m.blob_bytes) = *v;
    }
    m.meta = manifest.value("meta", json::object());
    m.blob = manifest.at("blob").get<std::string>();
  } catch (const json::exception& e) {
    return IoError("checkpoint manifest '" + manifest_path + "' is malformed: " + e.what());
  }
  // The directory's name and the manifest agree on the step.
  const std::string dir_name = dir.filename().string();
  if (dir_name.rfind("step-", 0) == 0 && dir_name != StepDirName(m.step))
    return IoError("checkpoint manifest '" + manifest_path + "' field 'step' is " + std::to_string(m.step) +
                   " but its directory is '" + dir_name + "'; restore the checkpoint or load an older step");
  if (m.step < 0 || m.blob_bytes < 0)
    return IoError("checkpoint manifest '" + manifest_path + "' has a negative 'step' or 'blob_bytes' (allowed: >= 0)"
                   "; restore the checkpoint or load an older step");
  try {
    int64_t expected_offset = 0;  // WriteCheckpoint stores tensors back to back
    std::set<std::string> names;
    for (const json& t : manifest.at("tensors")) {
      ManifestEntry e;
      e.name = t.at("name").get<std::string>();
      if (!names.insert(e.name).second)
        return IoError("checkpoint tensor '" + e.name + "' appears twice in '" + manifest_path +
                       "'; restore the checkpoint or load an older step");
      const json& shape = t.at("shape");
      std::optional<int64_t> offset = ExactInt64(t.at("offset")), bytes = ExactInt64(t.at("bytes"));
      bool ints = shape.is_array() && offset && bytes;
      for (size_t k = 0; ints && k < shape.size(); ++k) {
        const std::optional<int64_t> d = ExactInt64(shape[k]);
        ints = d.has_value();
        if (ints) e.shape.push_back(*d);
      }
      const std::optional<int64_t> crc = ExactInt64(t.at("crc32"));
      ints = ints && crc && *crc >= 0 && *crc <= int64_t{UINT32_MAX};
      if (!ints)
        return IoError("checkpoint tensor '" + e.name + "' in '" + manifest_path + "' has a shape, offset, bytes or "
                       "crc32 that is not a 64-bit integer (crc32: 32-bit); restore the checkpoint or load an older "
                       "step");
      e.offset = *offset;
      e.bytes = *bytes;
      e.crc32 = static_cast<uint32_t>(*crc);
      if (t.value("dtype", "") != "f32")
        return IoError("checkpoint tensor '" + e.name + "' in '" + manifest_path + "' has dtype '" +
                       t.value("dtype", "") + "'; only f32 is supported");
      // Every size is checked before it is multiplied or added: a manifest
      // is input, and int64 overflow would index outside the blob.
      int64_t numel = 1;
      bool sane = e.offset >= 0 && e.bytes >= 0 && e.offset <= m.blob_bytes && e.bytes <= m.blob_bytes - e.offset;
      for (int64_t d : e.shape) {
        if (!sane) break;
        sane = d >= 0 && (d == 0 || numel <= m.blob_bytes / 4 / d);
        if (sane) numel *= d;
      }
      if (!sane || e.bytes != numel * 4)
        return IoError("checkpoint tensor '" + e.name + "' in '" + manifest_path + "' has an inconsistent offset/size"
                       " (offset " + std::to_string(e.offset) + ", bytes " + std::to_string(e.bytes) + ", blob " +
                       std::to_string(m.blob_bytes) + " bytes); restore the checkpoint or load an older step");
      if (e.offset != expected_offset)
        return IoError("checkpoint tensor '" + e.name + "' in '" + manifest_path + "' starts at byte " +
                       std::to_string(e.offset) + " but the previous entry ends at " +
                       std::to_string(expected_offset) +
                       (e.offset > expected_offset ? ": bytes in '" + (dir / m.blob).string() + "' belong to no entry (an entry was "
                                                     "removed?)"
                                                   : ": entries overlap") +
                       "; restore the checkpoint or load an older step");
      expected_offset += e.bytes;
      m.tensors.push_back(std::move(e));
    }
    if (expected_offset != m.blob_bytes)
      return IoError("checkpoint manifest '" + manifest_path + "' describes " + std::to_string(expected_offset) +
                     " bytes of tensors but 'blob_bytes' is " + std::to_string(m.blob_bytes) +
                     ": its tail belongs to no entry (an entry was removed?); restore the checkpoint or load an "
                     "older step");
  } catch (const json::exception& e) {
    return IoError("checkpoint manifest '" + manifest_path + "' is malformed: " + e.what());
  }
  return m;
}

StatusOr<CheckpointContents> DecodeCheckpoint(const CheckpointManifest& m, const std::string& blob,
                                              const std::string& blob_path) {
  if (static_cast<int64_t>(blob.size()) != m.blob_bytes)
    return IoError("checkpoint blob '" + blob_path + "' is truncated or padded: " + std::to_string(blob.size()) +
                   " bytes, manifest says " + std::to_string(m.blob_bytes) + "; restore it or load an older step");
  CheckpointContents c;
  c.step = m.step;
  c.meta = m.meta;
  for (const ManifestEntry& e : m.tensors) {  // ParseManifest checked that each lies inside blob_bytes
    const char* bytes = blob.data() + e.offset;
    if (Crc32(bytes, static_cast<size_t>(e.bytes)) != e.crc32)
      return IoError("checkpoint tensor '" + e.name + "' in '" + blob_path +
                     "' fails its CRC-32 check (corrupt data); restore the file or load an older step");
    NamedTensor nt;
    nt.name = e.name;
    nt.shape = e.shape;
    nt.data.resize(static_cast<size_t>(e.bytes / 4));
    if (e.bytes > 0) std::memcpy(nt.data.data(), bytes, static_cast<size_t>(e.bytes));
    c.tensors.push_back(std::move(nt));
  }
  return c;
}

StatusOr<CheckpointContents> ReadCheckpoint(const std::string& path) {
  std::string dir = path;
  if (!fs::exists(fs::path(path) / kManifest)) {
    DT_ASSIGN_OR_RETURN(dir, LatestCheckpointDir(path));
  }
  const std::string manifest_path = (fs::path(dir) / kManifest).string();
  const std::string crc_path = (fs::path(dir) / kManifestCrc).string();
  bool read_ok = false;
  const std::string text = ReadAll(manifest_path, &read_ok);
  if (!read_ok) return IoError("checkpoint manifest '" + manifest_path + "' cannot be read");
  const std::string want_crc = ReadAll(crc_path, &read_ok);
  if (!read_ok)
    return IoError("checkpoint manifest checksum '" + crc_path + "' is missing (a save older than the checksum, or "
                   "a damaged copy); restore it or load an older step");
  DT_ASSIGN_OR_RETURN(CheckpointManifest m, ParseManifest(text, want_crc, manifest_path));
  const std::string blob_path = (fs::path(dir) / m.blob).string();
  bool blob_ok = false;
  const std::string blob = ReadAll(blob_path, &blob_ok);
  if (!blob_ok) return IoError("checkpoint blob '" + blob_path + "' is missing");
  return DecodeCheckpoint(m, blob, blob_path);
}

}  // namespace dt::rt
