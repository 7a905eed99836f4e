#include "core/config/text_location.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ddplab {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::TextFormat;

// The path one field shorter: "a.b[1]" for "a.b[1].c", "a.b" for "a.b[1]", "" for "a".
absl::string_view Parent(absl::string_view path) {
  if (!path.empty() && path.back() == ']') {
    const size_t open = path.rfind('[');
    return open == absl::string_view::npos ? absl::string_view() : path.substr(0, open);
  }
  const size_t dot = path.rfind('.');
  return dot == absl::string_view::npos ? absl::string_view() : path.substr(0, dot);
}

// The text of `line` before `column` (both from 0); empty where the line is not there.
absl::string_view TextBefore(absl::string_view text, int line, int column) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (line < 0 || static_cast<size_t>(line) >= lines.size()) return {};
  return lines[line].substr(0, std::min(static_cast<size_t>(std::max(column, 0)), lines[line].size()));
}

}  // namespace

int BlameColumn(absl::string_view text, int line, int column, absl::string_view message) {
  const absl::string_view before = TextBefore(text, line, column);
  // Quoted words alternate with the text between them: "a \"x\" b \"y\"" splits into
  // a, x, b, y, so the odd pieces are the quoted names.
  std::vector<absl::string_view> pieces = absl::StrSplit(message, '"');
  for (size_t i = 1; i + 1 < pieces.size(); i += 2) {
    if (pieces[i].empty()) continue;
    size_t found = before.rfind(pieces[i]);
    if (found != absl::string_view::npos) return static_cast<int>(found);
  }
  return column;
}

std::string FieldBefore(absl::string_view text, int line, int column) {
  absl::string_view before = absl::StripTrailingAsciiWhitespace(TextBefore(text, line, column));
  if (!absl::ConsumeSuffix(&before, ":")) return "";
  before = absl::StripTrailingAsciiWhitespace(before);
  size_t start = before.size();
  while (start > 0 && (absl::ascii_isalnum(before[start - 1]) || before[start - 1] == '_')) --start;
  return std::string(before.substr(start));
}

std::string FormatLocation(absl::string_view file, int line, int column) {
  // The parser counts from 0; editors and compilers count from 1.
  return absl::StrCat(file, ":", line + 1, ":", column + 1);
}

TextPositions::TextPositions(const google::protobuf::Message& parsed, const TextFormat::ParseInfoTree& tree) {
  Walk(parsed, tree, "");
}

void TextPositions::Walk(const google::protobuf::Message& m, const TextFormat::ParseInfoTree& tree,
                         const std::string& prefix) {
  const Descriptor* d = m.GetDescriptor();
  const google::protobuf::Reflection* r = m.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* field = d->field(i);
    const std::string path = absl::StrCat(prefix, prefix.empty() ? "" : ".", field->name());
    if (!field->is_repeated()) {
      const TextFormat::ParseLocation at = tree.GetLocation(field, -1);
      if (at.line < 0) continue;
      at_[path] = at;
      const TextFormat::ParseInfoTree* nested = field->message_type() ? tree.GetTreeForNested(field, -1) : nullptr;
      if (nested != nullptr) Walk(r->GetMessage(m, field), *nested, path);
      continue;
    }
    for (int k = 0; k < r->FieldSize(m, field); ++k) {
      // A list ("f: [1, 2, 3]") records one location, its field name's: the first.
      const TextFormat::ParseLocation at = tree.GetLocation(field, k);
      if (at.line < 0) continue;
      const std::string element = absl::StrCat(path, "[", k, "]");
      at_[element] = at;
      if (k == 0) at_[path] = at;
      const TextFormat::ParseInfoTree* nested = field->message_type() ? tree.GetTreeForNested(field, k) : nullptr;
      if (nested != nullptr) Walk(r->GetRepeatedMessage(m, field, k), *nested, element);
    }
  }
}

TextFormat::ParseLocation TextPositions::Find(absl::string_view path, size_t* matched) const {
  for (absl::string_view p = path; !p.empty(); p = Parent(p)) {
    if (auto it = at_.find(p); it != at_.end()) {
      if (matched != nullptr) *matched = p.size();
      return it->second;
    }
  }
  if (matched != nullptr) *matched = 0;
  return TextFormat::ParseLocation();
}

bool TextPositions::Written(absl::string_view path) const { return at_.find(path) != at_.end(); }

absl::Status Locator::Error(absl::string_view path, absl::string_view what) const {
  TextFormat::ParseLocation best;
  size_t best_depth = 0;
  for (const std::string& root : roots_) {
    if (positions_ == nullptr) break;
    const std::string full = root.empty() ? std::string(path) : absl::StrCat(root, ".", path);
    size_t matched = 0;
    TextFormat::ParseLocation found = positions_->Find(full, &matched);
    const size_t depth = matched > root.size() ? matched - root.size() : 0;
    if (depth > best_depth) {
      best_depth = depth;
      best = found;
    }
  }
  if (best_depth > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(FormatLocation(file_, best.line, best.column), ": ", path, ": ", what));
  }
  if (fallback_.line >= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        FormatLocation(file_, fallback_.line, fallback_.column), ": experiment \"",
        experiment_, "\": ", path, ": ", what));
  }
  return absl::InvalidArgumentError(absl::StrCat(file_, ": ", path, ": ", what));
}

void KeepWrittenFields(const google::protobuf::Message& own, google::protobuf::Message& resolved,
                       const TextPositions& positions, const std::string& path) {
  const Descriptor* descriptor = own.GetDescriptor();
  const google::protobuf::Reflection* from = own.GetReflection();
  const google::protobuf::Reflection* to = resolved.GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    if (field->is_repeated()) continue;
    const std::string here = absl::StrCat(path, path.empty() ? "" : ".", field->name());
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (positions.Written(here) && from->HasField(own, field)) {
        KeepWrittenFields(from->GetMessage(own, field), *to->MutableMessage(&resolved, field), positions, here);
      }
      continue;
    }
    if (!positions.Written(here)) continue;
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_BOOL:
        to->SetBool(&resolved, field, from->GetBool(own, field));
        break;
      case FieldDescriptor::CPPTYPE_INT32:
        to->SetInt32(&resolved, field, from->GetInt32(own, field));
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        to->SetInt64(&resolved, field, from->GetInt64(own, field));
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        to->SetUInt32(&resolved, field, from->GetUInt32(own, field));
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        to->SetUInt64(&resolved, field, from->GetUInt64(own, field));
        break;
      case FieldDescriptor::CPPTYPE_FLOAT:
        to->SetFloat(&resolved, field, from->GetFloat(own, field));
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE:
        to->SetDouble(&resolved, field, from->GetDouble(own, field));
        break;
      case FieldDescriptor::CPPTYPE_ENUM:
        to->SetEnumValue(&resolved, field, from->GetEnumValue(own, field));
        break;
      case FieldDescriptor::CPPTYPE_STRING:
        to->SetString(&resolved, field, from->GetString(own, field));
        break;
      default:
        break;
    }
  }
}


absl::Status FieldError(absl::StatusCode code, absl::string_view path, absl::string_view what) {
  absl::Status s(code, absl::StrCat(path, ": ", what));
  s.SetPayload(kFieldPayload, absl::Cord(path));
  return s;
}

std::string FieldOf(const absl::Status& status) {
  const auto field = status.GetPayload(kFieldPayload);  // absl::optional<absl::Cord>
  return field ? std::string(*field) : "";
}

std::string WhatOf(const absl::Status& status) {
  const std::string field = FieldOf(status);
  const absl::string_view message = status.message();
  if (!field.empty() && absl::StartsWith(message, absl::StrCat(field, ": "))) {
    return std::string(message.substr(field.size() + 2));
  }
  return std::string(message);
}

absl::Status Together(std::vector<absl::Status> found) {
  std::vector<std::string> lines;
  std::set<std::string> said;
  const absl::Status* first = nullptr;
  int more = 0;
  for (const absl::Status& s : found) {
    if (s.ok()) continue;
    if (first == nullptr) first = &s;
    // A message of several lines (errors already together) counts line by line.
    for (absl::string_view line : absl::StrSplit(s.message(), '\n')) {
      if (!said.insert(std::string(line)).second) continue;
      if (static_cast<int>(lines.size()) < kMostErrors) {
        lines.push_back(std::string(line));
      } else {
        ++more;
      }
    }
  }
  if (first == nullptr) return absl::OkStatus();
  if (more > 0) lines.push_back(absl::StrCat("... and ", more, " more"));
  absl::Status together(first->code(), absl::StrJoin(lines, "\n"));
  first->ForEachPayload([&](absl::string_view url, const absl::Cord& payload) { together.SetPayload(url, payload); });
  return together;
}

}  // namespace ddplab
