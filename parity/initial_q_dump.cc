// Writes the random initial Qs ddplab's powersgd draws for a seed (initial_q.h), for
// hooks_parity_test.py to compare with PyTorch's number for number:
//
//   initial_q_dump --random_seed=3 --shapes=48x4,96x4 --out=q.f32
//
// draws QSeeds(random_seed).Next() once and writes RandomQs(that, shapes) one after
// another in raw float32. Exit codes: 0 done, 13 bad flags, 23 --out not written.
#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "plugins/powersgd/initial_q.h"

ABSL_FLAG(uint32_t, random_seed, 0, "powersgd's random_seed");
ABSL_FLAG(std::string, shapes, "", "the Qs' shapes in order, rows x cols, comma-separated: 48x4,96x4");
ABSL_FLAG(std::string, out, "", "where the Qs go");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (absl::string_view shape : absl::StrSplit(absl::GetFlag(FLAGS_shapes), ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> dims = absl::StrSplit(shape, 'x');
    int64_t rows = 0, cols = 0;
    if (dims.size() != 2 || !absl::SimpleAtoi(dims[0], &rows) || !absl::SimpleAtoi(dims[1], &cols)) return 13;
    shapes.emplace_back(rows, cols);
  }
  if (shapes.empty()) return 13;
  ddplab::powersgd::QSeeds seeds(absl::GetFlag(FLAGS_random_seed));
  std::ofstream out(absl::GetFlag(FLAGS_out), std::ios::binary);
  for (const at::Tensor& q : ddplab::powersgd::RandomQs(seeds.Next(), shapes)) {
    out.write(reinterpret_cast<const char*>(q.data_ptr<float>()), static_cast<std::streamsize>(q.numel() * sizeof(float)));
  }
  return out.flush() ? 0 : 23;
}
