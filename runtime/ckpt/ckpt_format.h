// Checkpoint on-disk format: plan-independent full tensors by global name.
//
//   <root>/step-N/manifest.json   {"format": "dtplan-checkpoint-1", "step": N,
//                                  "meta": {...}, "blob": "tensors.bin",
//                                  "blob_bytes": B, "tensors": [{"name",
//                                  "shape", "dtype": "f32", "offset", "bytes",
//                                  "crc32"}, ...]}
//   <root>/step-N/tensors.bin     the tensors' little-endian fp32 data, back to back
//   <root>/step-N/manifest.crc32  CRC-32 of manifest.json's bytes, 8 hex digits + "\n"
//   <root>/latest                 one line: "step-N" (the newest complete save)
//
// Atomicity: WriteCheckpoint writes into step-N.tmp/, fsyncs both files and
// the directory, renames it to step-N/ (replacing an older step-N), fsyncs
// the root, then replaces "latest" by writing latest.tmp + fsync + rename. A
// crash at any point leaves "latest" naming the previous complete checkpoint
// (a leftover step-*.tmp/ is ignored and removed by the next save).
// ReadCheckpoint verifies the manifest against its CRC-32 sidecar (an edited
// or damaged manifest is refused, not trusted), that the manifest's step
// matches its step-N directory, that the entries tile the blob back to back
// with no duplicate (a removed entry is detected), the blob size and every
// tensor's CRC-32; errors (kIoError) name the file and the entry. Single-process; not thread-safe
// for the same root.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/json_fields.h"

namespace dt::rt {

struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
};

struct CheckpointContents {
  int64_t step = 0;
  json meta = json::object();
  std::vector<NamedTensor> tensors;
  const NamedTensor* Find(const std::string& name) const;
};

// A manifest.json as ParseManifest returns it: every field checked.
struct ManifestEntry {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;  // into the blob; entries tile [0, blob_bytes) in order
  int64_t bytes = 0;   // 4 x the shape's element count
  uint32_t crc32 = 0;  // of the entry's bytes in the blob
};
struct CheckpointManifest {
  int64_t step = 0;
  json meta = json::object();
  std::string blob;  // file name, relative to the step directory
  int64_t blob_bytes = 0;
  std::vector<ManifestEntry> tensors;
};

Status WriteCheckpoint(const std::string& root, const CheckpointContents& c);
// `path` is either a step directory (holding manifest.json) or a root with a
// "latest" pointer.
StatusOr<CheckpointContents> ReadCheckpoint(const std::string& path);
// ReadCheckpoint's checks on bytes already read, no file access (the fuzz
// harness tests/fuzz/manifest_fuzz.cc calls these). ParseManifest checks
// `text` against the sidecar's `crc_text`, then the format, the step (>= 0,
// and N when `manifest_path` lies in a step-N directory), blob_bytes >= 0 and
// every entry (unique name, f32, shape and sizes overflow-checked, entries
// back to back covering exactly blob_bytes). DecodeCheckpoint checks the
// blob's size and every tensor's CRC-32 and copies the tensors out. Errors
// are kIoError naming `manifest_path` / `blob_path` and the entry.
StatusOr<CheckpointManifest> ParseManifest(const std::string& text, const std::string& crc_text,
                                           const std::string& manifest_path);
StatusOr<CheckpointContents> DecodeCheckpoint(const CheckpointManifest& m, const std::string& blob,
                                              const std::string& blob_path);
// The step directory "latest" points to; without a "latest" file, the
// newest complete step directory (saying so on stderr); NotFound when there
// is none.
StatusOr<std::string> LatestCheckpointDir(const std::string& root);
// Steps N of the complete step-N/ directories under root, ascending.
std::vector<int64_t> CompleteCheckpointSteps(const std::string& root);
// Removes complete step directories beyond the newest `keep` (never the one
// "latest" names). WriteCheckpoint itself removes leftover step-*.tmp/.
Status PruneCheckpoints(const std::string& root, int keep);
std::string StepDirName(int64_t step);  // "step-N"

}  // namespace dt::rt
