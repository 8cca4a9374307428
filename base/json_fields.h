// FieldReader: typed access to the fields of one JSON object, with errors
// that name the file, the field and the fix.
//
// Usage:
//   FieldReader r(j, "model file 'gpt.json'");
//   int layers = r.Int("num_layers");                  // required
//   int kv = r.IntOr("num_kv_heads", heads);            // optional
//   if (!r.ok()) return r.status();
// The first error is kept; later getters return defaults after an error.
// The reader refers to `j` (not owned); `j` must outlive it. Never throws.
// Every key asked for (Has and the getters) is remembered, so that after
// reading, RejectUnknown() refuses a field no reader asked for: a typo
// ("tpp", "kv_heads") is an error naming the field, never silently ignored.
#pragma once

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "base/status.h"

namespace dt {

using json = nlohmann::json;

class FieldReader {
 public:
  FieldReader(const json& j, std::string where);

  bool Has(const char* key) const;  // present and not null
  int64_t Int(const char* key);
  int64_t IntOr(const char* key, int64_t dflt);
  double Num(const char* key);
  double NumOr(const char* key, double dflt);
  bool BoolOr(const char* key, bool dflt);
  std::string Str(const char* key);
  std::string StrOr(const char* key, const std::string& dflt);
  // Fails unless lo <= v <= hi, naming the field.
  void Range(const char* key, int64_t v, int64_t lo, int64_t hi);
  void Fail(const std::string& message);
  // Fails on the first field of the object that no getter or Has asked for
  // and that is not in `also_known` (fields read only in some cases),
  // listing the known ones. Call once, after the last read.
  void RejectUnknown(std::initializer_list<const char*> also_known = {});

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  const std::string& where() const { return where_; }

 private:
  const json* Get(const char* key, const char* type_name);
  const json& j_;
  std::string where_;
  Status status_;
  mutable std::set<std::string> asked_;
};

// Parses JSON text; `path` names its source in errors ("'<path>' is not
// valid JSON: <parse position>"). No file access: the in-memory entry point
// the loaders and the fuzz harnesses (tests/fuzz) share.
StatusOr<json> ParseJsonText(const std::string& text, const std::string& path);
// Reads the file and calls ParseJsonText; a missing file (NotFound) or a
// directory (InvalidArgument) is an error naming the path.
StatusOr<json> ReadJsonFile(const std::string& path);
// Writes atomically (temp file + rename; 2-space indentation). Every write
// and the close are checked (base/checked_write.h): a failure (disk full)
// returns kIoError naming the file and leaves neither it nor a temp file.
Status WriteJsonFile(const std::string& path, const json& j);
Status WriteTextFile(const std::string& path, const std::string& text);

}  // namespace dt
