#include "core/text_location.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ddplab {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::TextFormat;

// One step of a field path: a field and, for repeated fields, an element.
struct PathStep {
  const FieldDescriptor* field;
  int index;  // -1 for singular fields
};

// Resolves "data.batch_size" or "plugin[1].bucket_sizing.sweep_cap_mb[0]" against
// `root`. The paths are written in this file, so a bad one is a programming error.
std::vector<PathStep> ResolvePath(const Descriptor* root, absl::string_view path) {
  std::vector<PathStep> steps;
  const Descriptor* message = root;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    int index = -1;
    size_t bracket = part.find('[');
    if (bracket != absl::string_view::npos) {
      absl::string_view number = part.substr(bracket + 1, part.size() - bracket - 2);
      if (!absl::SimpleAtoi(number, &index)) index = 0;
      part = part.substr(0, bracket);
    }
    const FieldDescriptor* field = message ? message->FindFieldByName(std::string(part)) : nullptr;
    if (field == nullptr) break;
    steps.push_back({field, index});
    message = field->message_type();
  }
  return steps;
}

}  // namespace

int BlameColumn(absl::string_view text, int line, int column, absl::string_view message) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (line < 0 || static_cast<size_t>(line) >= lines.size()) return column;
  absl::string_view before =
      lines[line].substr(0, std::min(static_cast<size_t>(std::max(column, 0)), lines[line].size()));
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

std::string FormatLocation(absl::string_view file, int line, int column) {
  // The parser counts from 0; editors and compilers count from 1.
  return absl::StrCat(file, ":", line + 1, ":", column + 1);
}

absl::Status Locator::Error(const Descriptor* root, absl::string_view path, absl::string_view what) const {
  std::vector<PathStep> steps = ResolvePath(root, path);
  TextFormat::ParseLocation best;
  size_t best_depth = 0;
  for (const TextFormat::ParseInfoTree* tree : roots_) {
    size_t depth = 0;
    TextFormat::ParseLocation found;
    for (const PathStep& step : steps) {
      if (tree == nullptr) break;
      if (step.field->is_repeated() && step.index < 0) {
        // The field as a whole: its first element's location.
        found = tree->GetLocation(step.field, 0);
        if (found.line >= 0) depth++;
        break;
      }
      if (step.field->is_repeated() && !step.field->message_type() &&
          tree->GetLocation(step.field, step.index).line < 0) {
        // A list ("f: [1, 2, 3]") records one location, its field name's.
        found = tree->GetLocation(step.field, 0);
        if (found.line >= 0) depth++;
        break;
      }
      TextFormat::ParseLocation loc = tree->GetLocation(step.field, step.index);
      if (loc.line < 0) break;
      found = loc;
      depth++;
      tree = step.field->message_type() ? tree->GetTreeForNested(step.field, step.index)
                                        : nullptr;
    }
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
                       const TextFormat::ParseInfoTree* tree) {
  if (tree == nullptr) return;
  const Descriptor* descriptor = own.GetDescriptor();
  const google::protobuf::Reflection* from = own.GetReflection();
  const google::protobuf::Reflection* to = resolved.GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    if (field->is_repeated()) continue;
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      const TextFormat::ParseInfoTree* nested = tree->GetTreeForNested(field, -1);
      if (nested != nullptr && from->HasField(own, field)) {
        KeepWrittenFields(from->GetMessage(own, field), *to->MutableMessage(&resolved, field), nested);
      }
      continue;
    }
    if (tree->GetLocation(field, -1).line < 0) continue;  // not written
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


}  // namespace ddplab
