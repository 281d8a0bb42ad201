// Every verb's --help ends in one worked example and its exit statuses (cli/help_footer.cpp). Each example names only
// options its verb lists, and runs: from a scratch folder that sees the repository's data folders as the repository
// root does, in the order of `k3perf --help` (make-checkpoint's checkpoint serves inspect and generate), exiting 0,
// with each --json file it names written and parseable. gui (a window) and profile (a GPU) are parsed, not run.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct CommandResult {
  int status;
  std::string output;
};

CommandResult shell(const std::string& cmd) {
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  while (pipe && fgets(buf.data(), buf.size(), pipe)) out += buf.data();
  const int status = pipe ? pclose(pipe) : -1;
  return {WEXITSTATUS(status), out};
}

CommandResult k3perf(const std::string& args) { return shell(std::string(K3PERF_CLI_PATH) + " " + args); }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The names listed under "Subcommands:" of a help text.
std::vector<std::string> subcommands(const std::string& help) {
  std::vector<std::string> names;
  bool in = false;
  for (const std::string& line : lines_of(help)) {
    if (line == "Subcommands:" || line == "SUBCOMMANDS:") {
      in = true;
    } else if (in && line.rfind("  ", 0) == 0 && line.size() > 2 && line[2] != ' ') {
      names.push_back(line.substr(2, line.find(' ', 2) - 2));
    } else if (in) {
      break;
    }
  }
  return names;
}

// Words as the shell splits them (double quotes only, as the examples use).
std::vector<std::string> words(const std::string& command) {
  std::vector<std::string> out;
  std::string word;
  bool quoted = false, any = false;
  for (char c : command) {
    if (c == '"') {
      quoted = !quoted;
      any = true;
    } else if (c == ' ' && !quoted) {
      if (any) out.push_back(word);
      word.clear();
      any = false;
    } else {
      word += c;
      any = true;
    }
  }
  if (any) out.push_back(word);
  return out;
}

// Whether an option line of the help ("  --json TEXT ...", "  -o,--output TEXT ...") names `name`.
bool lists_option(const std::string& help, const std::string& name) {
  for (const std::string& line : lines_of(help)) {
    if (line.rfind("  -", 0) != 0) continue;
    std::istringstream names(line.substr(2, line.find(' ', 2) - 2));
    for (std::string n; std::getline(names, n, ',');) {
      if (n == name) return true;
    }
  }
  return false;
}

struct Example {
  std::string command;  // without the trailing "  # comment"
  std::string help;     // the verb's help (and its subcommand's, when the example names one)
};

Example example_of(const std::string& verb) {
  const CommandResult help = k3perf(verb + " --help");
  EXPECT_EQ(help.status, 0) << help.output;
  const std::string head = "Example (run from the repository root):\n  ";
  const std::size_t at = help.output.find(head);
  if (at == std::string::npos) {
    ADD_FAILURE() << verb << " --help has no example:\n" << help.output;
    return {};
  }
  std::string line = help.output.substr(at + head.size());
  line = line.substr(0, line.find('\n'));
  Example e{line.substr(0, line.find("  #")), help.output};
  const std::vector<std::string> w = words(e.command);
  EXPECT_GE(w.size(), 2u) << line;
  EXPECT_EQ(w[0], "k3perf") << line;
  EXPECT_EQ(w[1], verb) << line;
  if (w.size() > 2 && w[2][0] != '-') {
    for (const std::string& sub : subcommands(help.output)) {
      if (sub == w[2]) e.help += k3perf(verb + " " + sub + " --help").output;
    }
  }
  return e;
}

TEST(HelpExamples, EveryVerbHasOneThatRuns) {
  const std::vector<std::string> verbs = subcommands(k3perf("--help").output);
  ASSERT_GE(verbs.size(), 14u);
  const std::set<std::string> parsed_only = {"gui", "profile"};
  const fs::path dir = fs::temp_directory_path() / ("k3perf_help_examples_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const char* folder : {"scenarios", "data", "bench", "profiler"}) {
    fs::create_directory_symlink(fs::path(K3PERF_SOURCE_DIR) / folder, dir / folder);
  }
  for (const std::string& verb : verbs) {
    SCOPED_TRACE(verb);
    const Example e = example_of(verb);
    if (e.command.empty()) continue;
    EXPECT_NE(e.help.find("Exit status:\n  0  done\n"), std::string::npos) << e.help;
    EXPECT_NE(e.help.find("\n  2  "), std::string::npos) << e.help;
    EXPECT_NE(e.help.find("\n  3  an internal error"), std::string::npos) << e.help;
    // Every option the example gives is one the verb lists ("  --json TEXT", "  -o,--output TEXT").
    const std::vector<std::string> w = words(e.command);
    std::vector<std::string> json_outputs;
    for (std::size_t i = 2; i < w.size(); ++i) {
      if (w[i] == "--") break;  // a program's own arguments follow
      if (w[i].rfind("-", 0) != 0) continue;
      const std::string name = w[i].substr(0, w[i].find('='));
      EXPECT_TRUE(lists_option(e.help, name)) << name << " is not an option of " << verb << ":\n" << e.help;
      if (name == "--json" && i + 1 < w.size()) json_outputs.push_back(w[i + 1]);
    }
    if (parsed_only.count(verb)) continue;
    const CommandResult r = shell("cd " + dir.string() + " && " + K3PERF_CLI_PATH + e.command.substr(6));
    EXPECT_EQ(r.status, 0) << e.command << "\n" << r.output;
    for (const std::string& file : json_outputs) {
      std::ifstream in(dir / file);
      ASSERT_TRUE(in) << file;
      const nlohmann::json j = nlohmann::json::parse(in);
      EXPECT_TRUE(j.contains("format")) << file;  // every JSON output starts with the common header
    }
  }
  fs::remove_all(dir);
}

}  // namespace
