#include "sim/cache/prefix_cache.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace k3::cache {
namespace {

uint64_t mix(uint64_t x) {  // SplitMix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

struct PrefixCache::Node {
  int64_t start_tokens = 0;
  int64_t end_tokens = 0;
  int32_t seen = 0;  // requests whose prompt passed through this prefix
};

struct PrefixCache::Item {
  int tier = -1;  // -1: not cached
  uint32_t version = 0;
  uint64_t last_touch = 0;
  int64_t last_request = 0;
  double bytes = 0;
  double relative_flops_per_byte = 0;
};

struct PrefixCache::HeapEntry {
  double priority;
  uint64_t touch;
  uint32_t item;
  uint32_t version;
  bool operator>(const HeapEntry& o) const { return priority != o.priority ? priority > o.priority : touch > o.touch; }
};

struct PrefixCache::Tier {
  double capacity_bytes = 0;
  double read_bytes_per_s = 0;
  double used_bytes = 0;
  int64_t live_items = 0;
  std::priority_queue<HeapEntry, std::vector<HeapEntry>, std::greater<HeapEntry>> heap;
};

PrefixCache::PrefixCache(const CacheConfig& config, const CacheSizes& sizes, double capacity_scale)
    : config_(config), sizes_(sizes) {
  validate(config_);
  checkpoints_ = make_checkpoint_policy(config_);
  eviction_ = make_eviction_policy(config_);
  for (const cache::Tier& t : config_.tiers) {
    Tier s;
    s.capacity_bytes = t.capacity_bytes * capacity_scale;
    s.read_bytes_per_s = t.read_bytes_per_s;
    tiers_.push_back(std::move(s));
  }
}

PrefixCache::~PrefixCache() = default;

double PrefixCache::used_bytes(int tier) const { return tiers_.at(tier).used_bytes; }

int64_t PrefixCache::cached_kv_blocks() const {
  int64_t n = 0;
  for (std::size_t i = 0; i < items_.size(); i += 2) n += items_[i].tier >= 0;
  return n;
}

int64_t PrefixCache::cached_checkpoints() const {
  int64_t n = 0;
  for (std::size_t i = 1; i < items_.size(); i += 2) n += items_[i].tier >= 0;
  return n;
}

uint32_t PrefixCache::node_for(uint64_t key, int64_t start_tokens, int64_t end_tokens) {
  auto [it, inserted] = index_.try_emplace(key, static_cast<uint32_t>(nodes_.size()));
  if (!inserted) return it->second;
  nodes_.push_back({start_tokens, end_tokens, 0});
  // Efficiency relative to one token of KV at the prompt's start (eviction_policy.h).
  const double reference = sizes_.prefix_flops(1) / sizes_.kv_bytes_per_token;
  Item kv;
  kv.bytes = sizes_.kv_bytes_per_token * double(end_tokens - start_tokens);
  kv.relative_flops_per_byte =
      (sizes_.prefix_flops(double(end_tokens)) - sizes_.prefix_flops(double(start_tokens))) / kv.bytes / reference;
  Item state;
  state.bytes = sizes_.state_bytes;
  state.relative_flops_per_byte =
      sizes_.state_bytes > 0 ? sizes_.prefix_flops(double(end_tokens)) / sizes_.state_bytes / reference : 0;
  items_.push_back(kv);
  items_.push_back(state);
  return it->second;
}

void PrefixCache::push(uint32_t id) {
  const Item& it = items_[id];
  EvictionItem view;
  view.kind = id % 2 == 0 ? ItemKind::kv : ItemKind::state;
  view.last_touch = it.last_touch;
  view.last_request = it.last_request;
  view.bytes = it.bytes;
  view.relative_flops_per_byte = it.relative_flops_per_byte;
  Tier& t = tiers_[it.tier];
  t.heap.push({eviction_->priority(view), it.last_touch, id, it.version});
  // Drop stale entries now and then so the heap stays proportional to what is cached.
  if (t.heap.size() > 4 * static_cast<std::size_t>(t.live_items) + 4096) {
    std::vector<HeapEntry> live;
    while (!t.heap.empty()) {
      const HeapEntry e = t.heap.top();
      t.heap.pop();
      if (items_[e.item].tier == it.tier && items_[e.item].version == e.version) live.push_back(e);
    }
    for (const HeapEntry& e : live) t.heap.push(e);
  }
}

void PrefixCache::touch(uint32_t id) {
  Item& it = items_[id];
  it.last_touch = ++clock_;
  it.last_request = request_index_;
  ++it.version;
  if (it.tier >= 0) push(id);
}

void PrefixCache::make_room(int tier, double bytes) {
  Tier& t = tiers_[tier];
  while (t.used_bytes + bytes > t.capacity_bytes && !t.heap.empty()) {
    const HeapEntry e = t.heap.top();
    t.heap.pop();
    if (items_[e.item].tier != tier || items_[e.item].version != e.version) continue;  // stale
    place(e.item, tier + 1);  // demote, or drop from the last tier
  }
}

void PrefixCache::place(uint32_t id, int tier) {
  Item& it = items_[id];
  if (it.tier >= 0) {
    tiers_[it.tier].used_bytes -= it.bytes;
    --tiers_[it.tier].live_items;
    it.tier = -1;
  }
  ++it.version;
  for (int t = tier; t < static_cast<int>(tiers_.size()); ++t) {
    if (it.bytes > tiers_[t].capacity_bytes) continue;  // never fits in this tier
    make_room(t, it.bytes);
    if (tiers_[t].used_bytes + it.bytes > tiers_[t].capacity_bytes) continue;
    it.tier = t;
    tiers_[t].used_bytes += it.bytes;
    ++tiers_[t].live_items;
    push(id);
    return;
  }
}

RequestOutcome PrefixCache::serve(const workload::Request& r) {
  ++request_index_;
  RequestOutcome o;
  o.id = r.id;
  o.input_tokens = r.input_tokens;
  o.output_tokens = r.output_tokens;
  if (r.block_hashes.empty() || r.input_tokens <= 0) return o;
  const int64_t H = config_.hash_block_tokens;
  if (r.block_tokens <= 0 || H % r.block_tokens != 0) {
    throw InputError(
        fmt::format("request {}: its blocks of {} tokens cannot form hash blocks of {} tokens (the hash "
                    "block must be a multiple of the trace's block)",
                    r.id, r.block_tokens, H));
  }
  const int64_t per_unit = H / r.block_tokens;
  const int64_t blocks = static_cast<int64_t>(r.block_hashes.size());
  const int64_t units = (blocks + per_unit - 1) / per_unit;

  // The prompt's units, their nodes (created as needed), and what earlier requests saw of them.
  ends_.resize(units);
  seen_.resize(units);
  path_.resize(units);
  for (int64_t j = 0; j < units; ++j) {
    const int64_t last_block = std::min((j + 1) * per_unit, blocks) - 1;
    ends_[j] = std::min((j + 1) * H, r.input_tokens);
    const uint64_t key = mix(r.block_hashes[last_block] ^ mix(static_cast<uint64_t>(ends_[j])));
    path_[j] = node_for(key, j * H, ends_[j]);
    seen_[j] = nodes_[path_[j]].seen;
  }

  // Longest cached KV prefix, then the deepest state checkpoint within it.
  int64_t m = 0;
  while (m < units && items_[2 * path_[m]].tier >= 0) ++m;
  int64_t s = m;
  if (sizes_.needs_state) {
    while (s > 0 && items_[2 * path_[s - 1] + 1].tier < 0) --s;
  }
  o.kv_matched_tokens = m > 0 ? ends_[m - 1] : 0;
  o.hit_tokens = s > 0 ? ends_[s - 1] : 0;

  // What the hit reads from lower tiers.
  auto account = [&](uint32_t id) {
    const Item& it = items_[id];
    if (it.tier > 0) {
      o.loaded_bytes += it.bytes;
      o.load_ms += it.bytes / tiers_[it.tier].read_bytes_per_s * 1e3;
    }
  };
  for (int64_t j = 0; j < s; ++j) account(2 * path_[j]);
  if (sizes_.needs_state && s > 0) account(2 * path_[s - 1] + 1);

  // States first, deepest first; then KV deepest first, so a prefix is touched after its extensions.
  chosen_.clear();
  if (sizes_.needs_state) {
    const CheckpointRequest cr{ends_, seen_, r.input_tokens, H, config_.allocation_block_tokens, s};
    checkpoints_->choose(cr, chosen_);
    if (s > 0) chosen_.insert(chosen_.begin(), s - 1);  // the state the hit used stays in use
    for (auto j = chosen_.rbegin(); j != chosen_.rend(); ++j) {
      K3_CHECK(*j >= 0 && *j < units, "checkpoint policy '{}' chose unit {} of {}", config_.checkpoint, *j, units);
      const uint32_t id = 2 * path_[*j] + 1;
      if (items_[id].tier < 0 && *j >= s) ++o.checkpoints_written;
      touch(id);
      if (items_[id].tier != 0) place(id, 0);
    }
  }
  for (int64_t j = units - 1; j >= 0; --j) {
    const uint32_t id = 2 * path_[j];
    touch(id);
    if (items_[id].tier != 0) place(id, 0);
    ++nodes_[path_[j]].seen;
  }
  return o;
}

std::vector<RequestOutcome> simulate(const std::vector<workload::Request>& requests, const CacheConfig& config,
                                     const CacheSizes& sizes) {
  validate(config);
  std::vector<std::unique_ptr<PrefixCache>> caches;
  const int count = config.pooled ? 1 : config.nodes;
  for (int i = 0; i < count; ++i) {
    caches.push_back(std::make_unique<PrefixCache>(config, sizes, config.pooled ? config.nodes : 1));
  }
  std::vector<RequestOutcome> out;
  out.reserve(requests.size());
  int64_t next = 0;
  for (const workload::Request& r : requests) {
    int node = 0;
    if (count > 1) {
      if (config.routing == Routing::round_robin) {
        node = static_cast<int>(next++ % count);
      } else {
        // Session affinity: the session, else the prompt's first block (its system prompt or task).
        const uint64_t key = r.session_id >= 0 ? mix(static_cast<uint64_t>(r.session_id))
                                               : (r.block_hashes.empty() ? mix(static_cast<uint64_t>(r.id))
                                                                         : mix(r.block_hashes.front()));
        node = static_cast<int>(key % static_cast<uint64_t>(count));
      }
    }
    RequestOutcome o = caches[node]->serve(r);
    o.node = node;
    out.push_back(o);
  }
  return out;
}

}  // namespace k3::cache
