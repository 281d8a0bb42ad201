#include "engine/runtime/memory_plan.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>

namespace k3::runtime {

namespace {
constexpr double kGiB = double(1ull << 30);
}  // namespace

uint64_t MemoryPlan::total_bytes() const {
  uint64_t total = 0;
  for (const Item& i : items) total += i.bytes;
  return total;
}

std::string MemoryPlan::describe() const {
  std::vector<Item> sorted = items;
  std::stable_sort(sorted.begin(), sorted.end(), [](const Item& a, const Item& b) { return a.bytes > b.bytes; });
  std::string out;
  for (const Item& i : sorted) out += fmt::format("  {:<44} {:>10.3f} GiB\n", i.what, i.bytes / kGiB);
  out += fmt::format("  {:<44} {:>10.3f} GiB\n", "total", total_bytes() / kGiB);
  return out;
}

void require_fits(const MemoryPlan& plan, uint64_t free_bytes, const std::string& device) {
  if (plan.total_bytes() <= free_bytes) return;
  throw InputError(fmt::format("the run does not fit on {}: it needs {:.3f} GiB, {:.3f} GiB are free:\n{}", device,
                               plan.total_bytes() / kGiB, free_bytes / kGiB, plan.describe()));
}

}  // namespace k3::runtime
