// Runs the built k3perf binary end to end.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>

namespace {

struct CommandResult {
  int status;
  std::string output;
};

CommandResult run(const std::string& args) {
  const std::string cmd = std::string(K3PERF_CLI_PATH) + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  while (pipe && fgets(buf.data(), buf.size(), pipe)) out += buf.data();
  const int status = pipe ? pclose(pipe) : -1;
  return {WEXITSTATUS(status), out};
}

TEST(Cli, DefaultRunPrintsSummary) {
  const CommandResult r = run("");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("TPOT"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("KDA layers"), std::string::npos);
}

}  // namespace
