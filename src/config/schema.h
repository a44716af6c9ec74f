// The config file's keys, in one place: the parser takes the keys it accepts under each
// section from here (an unknown key is an error naming the allowed ones), and
// docs/configuration.md's reference is rendered from here (`steward --print-config-reference`;
// the ctest Docs.ConfigReferenceIsTheSchema fails while the two differ). A key added to the
// parser without an entry here is refused as unknown, so the reference cannot miss it.
//
// The values shown are the defaults where a key has one (config.h's structs hold the same
// defaults; ConfigSchemaTest parses the rendered reference and compares it with a config that
// sets nothing), else an example.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace steward {

struct ConfigKey {
  // "cluster.ports.client". A section (a mapping) has no value. "[]" marks the fields of a
  // list's entries ("cluster.nodes[].name").
  std::string path;
  std::string value;  // as written in YAML: the default, or an example
  std::string doc;    // what it is for and what is checked; rendered as a comment
  bool section = false;
  // Shown commented out: keys of another mode than the example's (tls files mode).
  bool commented = false;
};

const std::vector<ConfigKey>& ConfigSchema();

// The keys directly under `section` ("" for the top level, "cluster.nodes[]" for a node entry).
std::set<std::string> ConfigKeysUnder(const std::string& section);

// The reference as one YAML block (without the ``` fence): every key with its value and comment.
std::string RenderConfigReference();

}  // namespace steward
