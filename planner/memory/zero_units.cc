#include "planner/memory/zero_units.h"

#include "base/check.h"
#include "planner/memory/param_count.h"

namespace dt {

int64_t UnitShard(int64_t n, int shard) { return (n + shard - 1) / shard; }
int64_t UnitPadded(int64_t n, int shard) { return UnitShard(n, shard) * shard; }

ChunkUnits ZeroChunkUnits(const ModelSpec& m, const PlanSpec& p, int chunk) {
  const int nch = p.num_chunks();
  DT_CHECK(chunk >= 0 && chunk < nch) << "chunk " << chunk;
  const bool first = chunk == 0, last = chunk == nch - 1;
  const int64_t h = m.hidden;
  const int64_t word = (m.vocab + p.tp - 1) / p.tp * h;
  ChunkUnits c;
  c.layer = LayerParamsPerRank(m, p);
  if (first) {
    c.units.push_back(word);
    if (m.learned_positions()) c.units.push_back(static_cast<int64_t>(m.max_position > 0 ? m.max_position : m.seq_length) * h);
  }
  const int layers = p.layers_per_chunk.empty() ? 0 : p.layers_per_chunk[chunk];
  c.units.reserve(c.units.size() + layers + 2);  // the last chunk's norm and word units
  c.units.insert(c.units.end(), layers, c.layer);
  c.uses.reserve(c.units.size() + 2);
  c.uses = c.units;
  if (last) {
    const int64_t norm = m.family == ModelFamily::kGpt ? 2 * h : h;
    c.units.push_back(norm);
    c.uses.push_back(norm);
    if (!m.tied_embeddings || nch > 1) c.units.push_back(word);
    c.uses.push_back(word);  // the LM head: its own unit, or the word unit again
    c.head_use = norm + word;
  }
  return c;
}

}  // namespace dt
