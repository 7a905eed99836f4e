// Where the fields of a parsed text-format file stand, for error messages that point at
// them: "experiments/x.textproto:7:15: data.batch_size: must be > 0, got 0".
//
//   google::protobuf::TextFormat::ParseInfoTree tree;   // filled by the parser
//   ddplab::TextPositions positions(parsed, tree);
//   ddplab::Locator at("x.textproto", &positions, {""}, {}, "my_experiment");
//   return at.Error("plugin[1].bucket_sizing.bucket_cap_mb", "must be > 0, got -1");
#ifndef DDPLAB_CORE_CONFIG_TEXT_LOCATION_H_
#define DDPLAB_CORE_CONFIG_TEXT_LOCATION_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "ddplab/v1/experiment.pb.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace ddplab {

// A further check of each resolved experiment's plugins, by whoever can load them (the
// plugin host: PluginHost::Configure). A failure's message starts with the field at fault
// ("plugin[1].bucket_sizing.first_bucket_cap_mb: must be ...") so that it is reported at
// that field's file:line:column.
using ConfigCheck = std::function<absl::Status(const v1::Experiment&)>;

// Note [Errors that name a field]
// A check of an experiment outside the loader (a ConfigCheck: the plugin host, the
// device's own checks) names the field at fault so that the loader reports it at its
// file:line:column. The field travels as the status's payload (kFieldPayload), not as a
// prefix to split off the message; the message still reads "path: what" for whoever
// prints it unlocated.
inline constexpr char kFieldPayload[] = "type.googleapis.com/ddplab.v1.Field";
// An error about the field at `path` of the experiment ("plugin[1].bucket_sizing.
// first_bucket_cap_mb", "data.pin_memory"): message "path: what", the path as payload.
absl::Status FieldError(absl::StatusCode code, absl::string_view path, absl::string_view what);
// The field a status names (FieldError), or "" where it names none.
std::string FieldOf(const absl::Status& status);
// The message of a FieldError without its "path: " prefix; the whole message otherwise.
std::string WhatOf(const absl::Status& status);

// Note [A file's errors together]
// A file with several mistakes hears of all of them in one run, not one per edit: the
// loader checks every experiment, and each part of an experiment (its name, model, data,
// steps, optimizer, precision, distributed settings, plugins, output), and reports the
// first error of each, in file order, one per line. A part whose check needs the others
// right (the plugin host's composition) runs only where they are. An error that the
// suite's defaults cause is said once, not once per experiment.
//
//   std::vector<absl::Status> found;
//   found.push_back(CheckModel(e));  // OK statuses are left out
//   return Together(std::move(found));
//
// Together returns OK where every status is; else an error whose message is the distinct
// messages, one a line (at most kMostErrors, then how many more), with the first error's
// code and payload.
inline constexpr int kMostErrors = 20;
absl::Status Together(std::vector<absl::Status> found);

// Keeps the first error the text-format parser reports.
class FirstErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (has_error_) return;
    has_error_ = true;
    line_ = line;
    column_ = column;
    message_ = message;
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber, const std::string&) override {}

  bool has_error() const { return has_error_; }
  int line() const { return line_; }
  int column() const { return column_; }
  const std::string& message() const { return message_; }

 private:
  bool has_error_ = false;
  int line_ = -1;
  int column_ = -1;
  std::string message_;
};

// The parser reports some errors at the token after the one at fault (an unknown field
// name, an unknown enum value). When its message quotes a name that stands earlier on
// the same line, the column of that name instead.
int BlameColumn(absl::string_view text, int line, int column, absl::string_view message);

// The name of the field whose value stands at `line`:`column` ("batch_size" in
// "data { batch_size: -4 }"), or "" where none stands before it on that line.
std::string FieldBefore(absl::string_view text, int line, int column);

// Where each field of a parsed text-format message was written, by its path from the
// message: "experiment[1].plugin[0].bucket_sizing.bucket_cap_mb". Paths, not descriptors,
// so that a message parsed with one schema (ExperimentSchema's readable form) is located
// after it is stored in another.
class TextPositions {
 public:
  TextPositions() = default;
  TextPositions(const google::protobuf::Message& parsed, const google::protobuf::TextFormat::ParseInfoTree& tree);

  // Where the longest written prefix of `path` (whole fields and elements) stands, and in
  // `matched` that prefix's length; line -1 and 0 if none is written.
  google::protobuf::TextFormat::ParseLocation Find(absl::string_view path, size_t* matched = nullptr) const;
  // Whether the field at `path` itself was written.
  bool Written(absl::string_view path) const;

 private:
  void Walk(const google::protobuf::Message& m, const google::protobuf::TextFormat::ParseInfoTree& tree,
            const std::string& prefix);
  std::map<std::string, google::protobuf::TextFormat::ParseLocation, std::less<>> at_;
};

// Singular fields an experiment writes out win over the suite's defaults even when they
// hold their type's default (false, 0, "", an enum's first value), which MergeFrom skips
// (proto3 keeps no presence for them): e.g. profiling { bucket_timing: false } under
// defaults that turn it on. `own` was written at `path` ("experiment[2]").
void KeepWrittenFields(const google::protobuf::Message& own, google::protobuf::Message& resolved,
                       const TextPositions& positions, const std::string& path);

// "file:line:column", counting from 1 as editors do (the parser counts from 0).
std::string FormatLocation(absl::string_view file, int line, int column);

// Finds where fields stand in the parsed text, for error messages.
class Locator {
 public:
  // `roots` are the paths searched in order (an experiment's own block, "experiment[2]",
  // then the suite's defaults, "defaults"; "" for the file's message itself); `fallback`
  // is where the experiment's block starts (line -1 if unknown).
  Locator(std::string file, const TextPositions* positions, std::vector<std::string> roots,
          google::protobuf::TextFormat::ParseLocation fallback, std::string experiment, const ConfigCheck* check = nullptr)
      : file_(std::move(file)),
        positions_(positions),
        roots_(std::move(roots)),
        fallback_(fallback),
        experiment_(std::move(experiment)),
        check_(check) {}

  const std::string& file() const { return file_; }
  // The caller's check of the experiment's plugins (ParseExperimentText), if any.
  const ConfigCheck* check() const { return check_ != nullptr && *check_ ? check_ : nullptr; }

  // An error about the field at `path` (relative to `root`): "file:line:col: path: what",
  // at the deepest part of the path that the text has.
  absl::Status Error(absl::string_view path, absl::string_view what) const;

 private:
  std::string file_;
  const TextPositions* positions_;
  std::vector<std::string> roots_;
  google::protobuf::TextFormat::ParseLocation fallback_;
  std::string experiment_;
  const ConfigCheck* check_;
};


}  // namespace ddplab

#endif  // DDPLAB_CORE_CONFIG_TEXT_LOCATION_H_
