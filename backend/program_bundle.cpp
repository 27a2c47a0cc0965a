#include "backend/program_bundle.h"

#include <cctype>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/string_view.h"

namespace lazycl::backend {
namespace {

bool IdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The identifiers of `text` in order (anything else separates them).
std::vector<std::string_view> Identifiers(std::string_view text) {
  std::vector<std::string_view> out;
  for (size_t i = 0; i < text.size();) {
    if (!IdentStart(text[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && IdentChar(text[j])) ++j;
    out.push_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}

// `line` without `__attribute__((...))` groups.
std::string WithoutAttributes(std::string_view line) {
  std::string out;
  constexpr std::string_view kAttr = "__attribute__";
  size_t i = 0;
  while (i < line.size()) {
    const size_t at = line.find(kAttr, i);
    if (at == std::string_view::npos) break;
    out.append(line.substr(i, at - i));
    size_t j = at + kAttr.size();
    while (j < line.size() && line[j] == ' ') ++j;
    int depth = 0;
    do {
      if (j >= line.size()) break;
      if (line[j] == '(') ++depth;
      if (line[j] == ')') --depth;
      ++j;
    } while (depth > 0);
    i = j;
  }
  out.append(line.substr(std::min(i, line.size())));
  return out;
}

// The name a file-scope line at column 0 defines, or "" (a statement, a declaration we do not
// rename, or not a definition at all).
std::string_view DefinedName(std::string_view line) {
  static const absl::flat_hash_set<std::string_view> kStatements = {
      "return", "if", "else", "while", "for", "switch", "do", "case", "goto", "sizeof"};
  const std::vector<std::string_view> words = Identifiers(line);
  if (words.empty() || kStatements.contains(words[0])) return {};
  if (words[0] == "typedef") {
    const size_t semi = line.find(';');
    if (semi == std::string_view::npos) return {};
    const std::vector<std::string_view> before = Identifiers(line.substr(0, semi));
    return before.size() >= 3 ? before.back() : std::string_view();
  }
  if (words[0] == "__constant" || words[0] == "constant") {
    const size_t end = line.find_first_of("[=;");
    const std::vector<std::string_view> before = Identifiers(line.substr(0, end));
    return before.size() >= 3 ? before.back() : std::string_view();
  }
  const size_t paren = line.find('(');
  if (paren == std::string_view::npos) return {};
  const std::string_view head = line.substr(0, paren);
  if (head.find_first_of("=;{}.,->+/[") != std::string_view::npos) return {};
  const std::vector<std::string_view> before = Identifiers(head);
  return before.size() >= 2 ? before.back() : std::string_view();
}

// The -D definitions of `options` as (name, value) pairs, and the other options.
struct SplitOptions {
  std::vector<std::pair<std::string, std::string>> defines;
  std::vector<std::string> rest;
};

SplitOptions Split(std::string_view options) {
  SplitOptions out;
  const std::vector<absl::string_view> tokens =
      absl::StrSplit(base::Sv(options), absl::ByAnyChar(" \t\n"), absl::SkipEmpty());
  for (size_t i = 0; i < tokens.size(); ++i) {
    absl::string_view token = tokens[i];
    if (!absl::ConsumePrefix(&token, "-D")) {
      out.rest.emplace_back(token);
      continue;
    }
    if (token.empty() && i + 1 < tokens.size()) token = tokens[++i];  // "-D NAME=VALUE"
    const size_t eq = token.find('=');
    if (eq == absl::string_view::npos) {
      out.defines.emplace_back(std::string(token), "1");
    } else {
      out.defines.emplace_back(std::string(token.substr(0, eq)), std::string(token.substr(eq + 1)));
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> DefinedNames(std::string_view source) {
  std::vector<std::string> names;
  absl::flat_hash_set<std::string> seen;
  bool in_comment = false;  // inside /* ... */
  bool continued = false;   // the previous line ended with a backslash (a directive goes on)
  for (absl::string_view line_sv : absl::StrSplit(base::Sv(source), '\n')) {
    std::string_view line(line_sv.data(), line_sv.size());
    const bool was_continued = continued;
    continued = !line.empty() && line.back() == '\\';
    if (in_comment) {
      const size_t end = line.find("*/");
      if (end == std::string_view::npos) continue;
      in_comment = false;
      line.remove_prefix(end + 2);
      continue;  // text after a closing comment is not at column 0
    }
    if (was_continued || line.empty() || !IdentStart(line[0])) {
      if (line.find("/*") != std::string_view::npos && line.find("*/") == std::string_view::npos &&
          line.rfind("//", line.find("/*")) == std::string_view::npos) {
        in_comment = true;
      }
      continue;
    }
    if (const size_t comment = line.find("//"); comment != std::string_view::npos) {
      line = line.substr(0, comment);
    }
    const std::string stripped = WithoutAttributes(line);
    const std::string_view name = DefinedName(stripped);
    if (!name.empty() && seen.insert(std::string(name)).second) names.emplace_back(name);
  }
  return names;
}

std::string SharedOptions(std::string_view options) {
  return absl::StrJoin(Split(options).rest, " ");
}

std::string BundleChunk(const ProgramSource& member, std::string_view suffix) {
  const SplitOptions options = Split(member.options);
  std::string chunk = absl::StrCat("// ---- bundle member ", base::Sv(suffix), "\n");
  std::vector<std::string> undefine;
  for (const auto& [name, value] : options.defines) {
    absl::StrAppend(&chunk, "#define ", name, " ", value, "\n");
    undefine.push_back(name);
  }
  for (const std::string& name : DefinedNames(member.source)) {
    absl::StrAppend(&chunk, "#define ", name, " ", name, base::Sv(suffix), "\n");
    undefine.push_back(name);
  }
  absl::StrAppend(&chunk, base::Sv(member.source));
  if (!member.source.empty() && member.source.back() != '\n') chunk += '\n';
  // Every macro the member defines, wherever it does (an #undef of an undefined name is allowed).
  for (absl::string_view line : absl::StrSplit(base::Sv(member.source), '\n')) {
    absl::string_view rest = absl::StripLeadingAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&rest, "#")) continue;
    rest = absl::StripLeadingAsciiWhitespace(rest);
    if (!absl::ConsumePrefix(&rest, "define")) continue;
    rest = absl::StripLeadingAsciiWhitespace(rest);
    size_t n = 0;
    while (n < rest.size() && IdentChar(rest[n])) ++n;
    if (n > 0) undefine.emplace_back(rest.substr(0, n));
  }
  absl::flat_hash_set<std::string> done;
  for (const std::string& name : undefine) {
    if (done.insert(name).second) absl::StrAppend(&chunk, "#undef ", name, "\n");
  }
  return chunk;
}

}  // namespace lazycl::backend
