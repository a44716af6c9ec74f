// The docs' examples run (issue 38): every shell example in README.md and docs/ marked
// `<!-- example: run -->` is run against a real local cluster (three agents, TLS, a file
// store), with the docs' paths mapped to the test's, and where the docs show its output, that
// output is checked (numbers and size units free: the docs show other clusters' figures).
// scripts/check_doc_examples.py --check (ctest Docs.EveryExampleIsRunOrMarked) keeps every
// other example marked illustrative, with why.
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "harness.h"
#include "nlohmann/json.hpp"

namespace steward::testing {
namespace {

constexpr int kDocSubnet = 97;

TEST(DocExamplesTest, TheRunnableExamplesRunAgainstALocalClusterAndPrintWhatTheDocsShow) {
  TestCluster c(kDocSubnet, 3, 3, kFastLeader, kFileBackup);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitHealthy(3, std::chrono::seconds(90))) << c.Logs();
  const std::string script = std::string(SOURCE_DIR) + "/scripts/check_doc_examples.py";
  RunResult listed = RunCommand({"/usr/bin/python3", script, "--root", SOURCE_DIR, "--json"},
                                std::chrono::seconds(30));
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  const nlohmann::json examples = nlohmann::json::parse(listed.output);
  ASSERT_GE(examples.size(), 6u) << "the doc test runs too few examples";

  const std::string dir = c.Root() + "/doc";
  std::filesystem::create_directories(dir);
  const std::string bin = std::filesystem::path(STEWARDCTL_BIN).parent_path().string();
  // The docs' paths on a production node, and the test's.
  auto map = [&](const std::string& text) {
    return absl::StrReplaceAll(text, {{"sudo ", ""},
                                      {"/etc/steward/pki", dir + "/pki"},
                                      {"/etc/steward/node.yaml", c.ConfigPath(0)},
                                      {"/var/tmp/", dir + "/"}});
  };
  for (const auto& e : examples) {
    const std::string where = absl::StrCat(e["file"].get<std::string>(), ":", e["line"].get<int>());
    SCOPED_TRACE(where);
    const std::string body = map(e["body"].get<std::string>());
    // stewardctl reads the node's config from STEWARD_CONFIG when no --config is given, as it
    // reads /etc/steward/node.yaml on a node.
    RunResult r = RunCommand({"/bin/bash", "-e", "-o", "pipefail", "-c",
                              absl::StrCat("export PATH='", bin, "':\"$PATH\" STEWARD_CONFIG='",
                                           c.ConfigPath(0), "'\n", body)},
                             std::chrono::seconds(120));
    ASSERT_EQ(r.exit_code, 0) << where << ":\n" << body << "\n--- printed:\n" << r.output;
    const std::string shown = e["output"].get<std::string>();
    if (shown.empty()) continue;
    std::ofstream(dir + "/expected") << map(shown);
    std::ofstream(dir + "/actual") << r.output;
    RunResult m =
        RunCommand({"/usr/bin/python3", script, "--match", dir + "/expected", dir + "/actual"},
                   std::chrono::seconds(30));
    EXPECT_EQ(m.exit_code, 0) << where << ": the output differs from what the docs show\n"
                              << m.output << "--- printed:\n"
                              << r.output;
  }
}

}  // namespace
}  // namespace steward::testing
