// ReleaseIdleMemory on this very process: the resident set shrinks, and the code and read-only
// data it released still work when touched again.
#include "common/memory_trim.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "nlohmann/json.hpp"

namespace steward {
namespace {

std::string Sha256Hex(std::string_view text) {
  Sha256 h;
  h.Update(text);
  std::string hex;
  for (unsigned char c : h.Raw()) absl::StrAppend(&hex, absl::Hex(c, absl::kZeroPad2));
  return hex;
}

TEST(MemoryTrimTest, ReleasesReadOnlyLibraryPagesAndEverythingStillWorks) {
  // Touch code in several libraries (OpenSSL through Sha256, nlohmann, absl, libstdc++) so
  // their pages are resident, and keep results to compare after the release.
  const std::string before_hash = Sha256Hex("the quick brown fox");
  const nlohmann::json doc = {{"a", {1, 2, 3}}};
  const std::string before_json = doc.dump();
  std::vector<std::string> heap;
  for (int i = 0; i < 2000; ++i) heap.push_back(std::string(4096, 'x'));  // then freed
  heap.clear();
  heap.shrink_to_fit();

  const MemoryRelease r = ReleaseIdleMemory();
  EXPECT_GT(r.segments, 0u) << Describe(r);
  ASSERT_GT(r.rss_before, 0u);
  EXPECT_LT(r.rss_after, r.rss_before) << Describe(r);
  EXPECT_NE(Describe(r).find("read-only segments"), std::string::npos);

  // The released pages come back from the file on first use, unchanged.
  EXPECT_EQ(Sha256Hex("the quick brown fox"), before_hash);
  EXPECT_EQ(nlohmann::json::parse(before_json), doc);
  EXPECT_EQ(absl::StrCat("n", 1, "-", 2.5), "n1-2.5");
  // Virtual calls through libstdc++'s vtables (relocated read-only data, which must not be
  // released) and an exception unwound through the released .eh_frame tables.
  std::ostringstream out;
  out << "pi " << 3.25;
  EXPECT_EQ(out.str(), "pi 3.25");
  EXPECT_THROW({ nlohmann::json parsed = nlohmann::json::parse("{not json"); },
               nlohmann::json::parse_error);
  // A second release right after finds little left to release, and breaks nothing either.
  const MemoryRelease again = ReleaseIdleMemory();
  EXPECT_EQ(again.segments, r.segments) << Describe(again);
  EXPECT_EQ(Sha256Hex("the quick brown fox"), before_hash);
}

}  // namespace
}  // namespace steward
