// Reads an Azure LLM inference trace (CSV, as published in Azure/AzurePublicDataset):
// a header `TIMESTAMP,ContextTokens,GeneratedTokens`, then one row per request with a wall-clock
// timestamp ("2023-11-16 18:15:46.6805900"), the prompt and the generated token counts.
// The trace has no prefix information: requests carry lengths and arrival times only.
#pragma once

#include "sim/workload/request.h"

#include <string>
#include <vector>

namespace k3::workload {

// Requests in file order, arrival_ms relative to the first row. Errors name the file, the line and
// the column: a wrong header, a malformed timestamp or count, or a timestamp earlier than the last.
std::vector<Request> read_azure_trace(const std::string& path);
std::vector<Request> parse_azure_trace(const std::string& text, const std::string& origin);

}  // namespace k3::workload
