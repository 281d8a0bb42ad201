#include "profiler/attribution/activity.h"

#include "core/error.h"

namespace k3::profiler {

ActivityRecords RecordedActivitySource::stop() {
  K3_CHECK(started_, "stop() without start()");
  started_ = false;
  return records_;
}

}  // namespace k3::profiler
