#include "tune/tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/text_format.h"
#include "core/engine/ddp_buckets.h"
#include "core/record/run_files.h"
#include "tune/model/partition.h"
#include "tune/predict.h"
#include "tune/spread.h"
#include "tune/lossless_levers.h"
#include "tune/model/step_model.h"
#include "tune/tune_cache.h"
#include "tune/model/verdict.h"

namespace ddplab::tune {
namespace {

constexpr double kMissed = 0.05;  // a prediction off by more than this missed

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// The probe: `base` with no_communication and the all-reduce sweep, and of its plugins
// those that configure beside no_communication (a communication hook of its own does not).
v1::Experiment MakeProbe(const v1::Experiment& base, Runner& runner, std::vector<std::string>& left_out) {
  v1::Experiment probe = base;
  probe.set_name(absl::StrCat(base.name(), "_probe"));
  probe.set_description(absl::StrCat("the tuner's probe of ", base.name(), ": backward alone, then an all-reduce sweep"));
  probe.clear_plugin();
  probe.add_plugin()->set_name(kNoCommunication);
  probe.mutable_profiling()->set_allreduce_sweep(true);
  probe.mutable_steps()->set_repetitions(1);
  for (const v1::Plugin& entry : base.plugin()) {
    if (entry.name() == kBucketSizing || entry.name() == kNoCommunication) continue;
    *probe.add_plugin() = entry;
    if (!runner.Check(probe).ok()) {
      probe.mutable_plugin()->RemoveLast();
      left_out.push_back(runner.schema().Print(entry, /*single_line=*/true));
    }
  }
  return probe;
}

// Bytes on the wire per gradient byte as `measured` sent them: the engine's own
// reductions (wire_bytes), or a hook's compression_ratio, else 1.
double WireFactor(const v1::RunResult& measured, const StepInputs& in) {
  double gradient_bytes = 0;
  for (const Gradient& g : in.gradients) gradient_bytes += static_cast<double>(g.bytes);
  if (measured.wire_bytes() > 0 && gradient_bytes > 0) return measured.wire_bytes() / gradient_bytes;
  if (auto it = measured.hook_stats().find("compression_ratio"); it != measured.hook_stats().end() && it->second > 1) {
    return 1 / it->second;
  }
  return 1;
}

struct Model {
  StepInputs in;
  CostCurve sweep;  // as measured
  CostCurve curve;  // the sweep's plus overhead_us per collective
  Levers levers;
  double other_ms = 0;     // the probe's step outside forward, backward and optimizer
  double overhead_us = 0;  // per collective, beyond the bare sweep's (calibrated)

  absl::Status SetOverhead(double us) {
    std::vector<CostPoint> points = sweep.points();
    for (CostPoint& p : points) p.time_us += us;
    absl::StatusOr<CostCurve> shifted = CostCurve::FromPoints(std::move(points));
    if (!shifted.ok()) return shifted.status();
    curve = *shifted;
    overhead_us = us;
    return absl::OkStatus();
  }
  Partition Buckets(double cap, double first) const {
    return BucketsByCap(in.gradients, ddp::MiBToBytes(first), ddp::MiBToBytes(cap));
  }
  // The whole step, as measured steps are.
  absl::StatusOr<double> StepMs(double cap, double first) const {
    absl::StatusOr<StepPrediction> p = PredictStep(in, curve, levers, Buckets(cap, first));
    if (!p.ok()) return p.status();
    return p->step_ms + other_ms;
  }
};

// x in [lo, hi] at which the nondecreasing f reaches `target` (lo where f(lo) is above
// it, hi where f(hi) is below it), by bisection.
absl::StatusOr<double> Solve(const std::function<absl::StatusOr<double>(double)>& f, double lo, double hi,
                             double target) {
  for (double x : {lo, hi}) {
    absl::StatusOr<double> y = f(x);
    if (!y.ok()) return y.status();
    if ((x == lo && *y >= target) || (x == hi && *y <= target)) return x;
  }
  for (int i = 0; i < 50 && hi - lo > 1e-9 * std::max(1.0, hi); ++i) {
    const double mid = (lo + hi) / 2;
    absl::StatusOr<double> y = f(mid);
    if (!y.ok()) return y.status();
    (*y < target ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

// Fits the model to the experiment as given, measured: first backward's slowdown beside
// collectives, s in [0, 1] (twice as slow at most); then, for what s cannot explain (collectives that do not
// overlap backward), a cost per collective beyond the bare sweep's (the engine's copies,
// hook and wait).
absl::Status Calibrate(Model& m, const v1::Experiment& base, const ExperimentSchema& schema, double measured_ms) {
  // Variables, not a structured binding: the lambdas capture them (C++17 lets no lambda
  // capture a binding; GCC allows it, clang does not).
  const Caps caps = CapsOf(base, schema);
  const double cap = caps.cap_mb, first = caps.first_mb;
  auto with_s = [&](double x) {
    m.levers.overlap_slowdown = x;
    return m.StepMs(cap, first);
  };
  absl::StatusOr<double> none = with_s(0), most = with_s(1);
  if (!none.ok()) return none.status();
  if (!most.ok()) return most.status();
  absl::StatusOr<double> s = 0.0;  // where no collective overlaps backward, s changes nothing
  if (*most - *none > 1e-3 * measured_ms) s = Solve(with_s, 0, 1, measured_ms);
  if (!s.ok()) return s.status();
  m.levers.overlap_slowdown = *s;
  absl::StatusOr<double> at = m.StepMs(cap, first);
  if (!at.ok()) return at.status();
  if (measured_ms - *at <= 0.005 * measured_ms) return absl::OkStatus();
  absl::StatusOr<double> us = Solve(
      [&](double x) -> absl::StatusOr<double> {
        if (absl::Status set = m.SetOverhead(x); !set.ok()) return set;
        return m.StepMs(cap, first);
      },
      0, measured_ms * 1e3, measured_ms);
  if (!us.ok()) return us.status();
  return m.SetOverhead(*us);
}

struct Measurements {
  v1::RunResult probe, base;
  bool cached = false;
  std::string note;
};

absl::StatusOr<Measurements> Measure(const TuneRequest& req, Runner& runner, const v1::Experiment& probe) {
  Measurements m;
  v1::Experiment base = req.base;
  base.mutable_steps()->set_repetitions(static_cast<uint32_t>(req.settings.repetitions));
  if (!req.cache_path.empty() && !req.settings.remeasure) {
    CacheLookup found = LookUp(req.cache_path, req.machine, probe, base);
    m.note = found.note;
    if (found.cache) {
      req.say(absl::StrCat("tune: reusing this machine's measurements of ", found.cache->date(), " (",
                           req.cache_path, ")"));
      m.probe = found.cache->probe_result();
      m.base = found.cache->base_result();
      m.cached = true;
      return m;
    }
    if (!m.note.empty()) req.say(absl::StrCat("tune: ", m.note));
  }
  req.say(absl::StrCat("tune: measuring the probe (backward alone, ready times, all-reduce sweep) and the experiment "
                       "as given (", req.settings.repetitions, " run(s): the spread a gain is judged against)"));
  // The probe once; the experiment as given as often as each candidate, so that a gain
  // over it is judged against both spreads, never against one run.
  const auto measure = [&runner](const v1::Experiment& e, int repetitions) -> absl::StatusOr<v1::RunResult> {
    absl::StatusOr<std::vector<absl::StatusOr<v1::RunResult>>> ran = runner.Run({e}, repetitions);
    if (!ran.ok()) return ran.status();
    const absl::Status failed = ran->empty() ? absl::InternalError("nothing ran") : ran->front().status();
    if (!failed.ok()) return absl::Status(failed.code(), absl::StrCat("the tuner's measurement failed: ", failed.message()));
    return *ran->front();
  };
  absl::StatusOr<v1::RunResult> measured = measure(probe, 1);
  if (!measured.ok()) return measured.status();
  m.probe = *std::move(measured);
  measured = measure(base, req.settings.repetitions);
  if (!measured.ok()) return measured.status();
  m.base = *std::move(measured);
  if (!req.cache_path.empty()) {
    v1::TuneCache cache;
    *cache.mutable_machine() = req.machine;
    *cache.mutable_probe() = probe;
    *cache.mutable_base() = base;
    *cache.mutable_probe_result() = m.probe;
    *cache.mutable_base_result() = m.base;
    cache.set_date(absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone()));
    if (absl::Status s = Store(req.cache_path, cache); !s.ok()) req.say(absl::StrCat("tune: not cached: ", s.message()));
  }
  return m;
}

// The model from the measurements, s calibrated on the experiment as given.
absl::StatusOr<Model> MakeModel(const Measurements& m, const v1::Experiment& base, const ExperimentSchema& schema) {
  absl::StatusOr<StepInputs> in = InputsFromResult(m.probe);
  if (!in.ok()) return in.status();
  // bf16 on the wire: bfloat16's own curve where the sweep has one (on GPUs), looked up
  // at the bytes sent.
  const bool bf16 = m.base.sent_dtype() == "BFloat16" &&
                    std::any_of(m.probe.allreduce_sweep().begin(), m.probe.allreduce_sweep().end(),
                                [](const v1::AllReduceRow& row) { return row.type() == "bfloat16"; });
  absl::StatusOr<CostCurve> curve = CurveFromResult(m.probe, bf16 ? "bfloat16" : "float");
  if (!curve.ok()) return curve.status();
  Model model{*in, *curve, *curve, {}, 0, 0};
  const v1::PhaseTimes& ph = m.probe.phases();
  model.other_ms = std::max(0.0, ph.step_ms() - ph.forward_ms() - ph.backward_ms() - ph.optimizer_ms());
  model.levers.wire_factor = WireFactor(m.base, model.in);
  if (absl::Status s = Calibrate(model, base, schema, StepSpread(m.base).median()); !s.ok()) return s;
  return model;
}

// Every cap's predicted step, in the order given; a cap whose buckets are an earlier
// cap's is the same configuration (same_as).
absl::Status PredictCaps(const Model& m, const TuneSettings& s, v1::Tuning& t) {
  std::vector<std::vector<size_t>> seen;
  for (double cap : s.caps_mib) {
    const Partition buckets = m.Buckets(cap, ddp::FirstCapMiB(cap));
    absl::StatusOr<double> ms = m.StepMs(cap, ddp::FirstCapMiB(cap));
    if (!ms.ok()) return ms.status();
    v1::TuneCandidate* c = t.add_candidates();
    c->set_bucket_cap_mb(cap);
    c->set_buckets(static_cast<int32_t>(buckets.buckets()));
    c->set_predicted_step_ms(*ms);
    for (size_t i = 0; i < seen.size(); ++i) {
      if (seen[i] == buckets.ends) {
        c->set_same_as(t.candidates(static_cast<int>(i)).bucket_cap_mb());
        break;
      }
    }
    seen.push_back(buckets.ends);
  }
  return absl::OkStatus();
}

// Runs every candidate `pick` names `repetitions` times; each one's result by index.
absl::StatusOr<std::map<int, v1::RunResult>> RunCandidates(const TuneRequest& req, Runner& runner,
                                                           const std::vector<int>& pick, const std::string& infix,
                                                           v1::Tuning& t) {
  std::vector<v1::Experiment> runs;
  for (int i : pick) {
    const double cap = t.candidates(i).bucket_cap_mb();
    runs.push_back(WithCap(req.base, cap, CapRunName(req.base.name(), cap, infix), runner.schema()));
    runs.back().mutable_steps()->set_repetitions(static_cast<uint32_t>(req.settings.repetitions));
  }
  absl::StatusOr<std::vector<absl::StatusOr<v1::RunResult>>> ran = runner.Run(runs, req.settings.repetitions);
  if (!ran.ok()) return ran.status();
  std::map<int, v1::RunResult> results;
  for (size_t k = 0; k < pick.size(); ++k) {
    if ((*ran)[k].ok()) {
      results[pick[k]] = *(*ran)[k];
    } else {
      req.say(absl::StrCat("tune: ", runs[k].name(), " failed: ", (*ran)[k].status().message()));
    }
  }
  return results;
}

// Runs the `verify` fastest predicted; their measurements beside their predictions.
absl::StatusOr<std::map<int, v1::RunResult>> Verify(const TuneRequest& req, Runner& runner, v1::Tuning& t) {
  std::vector<int> order(t.candidates_size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  order.erase(std::remove_if(order.begin(), order.end(), [&t](int i) { return t.candidates(i).same_as() > 0; }),
              order.end());
  std::stable_sort(order.begin(), order.end(), [&t](int a, int b) {
    return t.candidates(a).predicted_step_ms() < t.candidates(b).predicted_step_ms();
  });
  order.resize(std::min<size_t>(order.size(), static_cast<size_t>(req.settings.verify)));
  req.say(absl::StrCat("tune: verifying the ", order.size(), " fastest predicted, ", req.settings.repetitions,
                       " run(s) each"));
  absl::StatusOr<std::map<int, v1::RunResult>> results = RunCandidates(req, runner, order, "", t);
  if (!results.ok()) return results.status();
  for (int i : order) t.mutable_candidates(i)->set_verified(true);
  for (const auto& [i, r] : *results) {
    v1::TuneCandidate* c = t.mutable_candidates(i);
    c->set_experiment(r.experiment());
    *c->mutable_measured_step_ms() = StepSpread(r);
    c->set_measured_exposed_ms(r.exposed_comm_ms());
    c->set_error(c->measured_step_ms().median() / c->predicted_step_ms() - 1);
    c->set_missed(std::abs(c->error()) > kMissed);
  }
  if (results->empty()) return absl::InternalError("no candidate of the tuner ran to the end: nothing is verified");
  return results;
}

// The answer `cap` as an experiment file (written to answer_path) and as PyTorch code for
// training (Runner::TrainingCode).
absl::Status WriteAnswer(const TuneRequest& req, const ExperimentSchema& schema, Runner& runner, double cap,
                         v1::Tuning& t) {
  t.set_chosen_cap_mb(cap);
  t.set_textproto(TunedExperimentText(
      req.base, cap,
      absl::StrCat(req.base.name(), " with the bucket_cap_mb vit_ddp --tune chose on ", req.machine.device(),
                   LeversTaken(t)),
      schema));
  if (!req.answer_path.empty()) {
    if (absl::Status s = WriteFileAtomically(req.answer_path, t.textproto()); !s.ok()) return s;
    t.set_textproto_path(req.answer_path);
  }
  absl::StatusOr<std::string> code = runner.TrainingCode(WithCap(req.base, cap, req.base.name(), schema));
  if (!code.ok()) return code.status();
  t.set_pytorch(*code);
  return absl::OkStatus();
}

// The chosen candidate (fastest measured), its forms, and its gain over the experiment as given.
absl::Status Answer(const TuneRequest& req, const ExperimentSchema& schema, Runner& runner, const Measurements& m,
                    const Model& model, const std::map<int, v1::RunResult>& results, v1::Tuning& t) {
  int chosen = results.begin()->first;
  for (const auto& [i, r] : results) {
    if (t.candidates(i).measured_step_ms().median() < t.candidates(chosen).measured_step_ms().median()) chosen = i;
  }
  const v1::TuneCandidate& c = t.candidates(chosen);
  t.set_chosen_experiment(c.experiment());
  // The experiment as given: the runs of a verified candidate with its buckets, else its one run.
  *t.mutable_base_step_ms() = StepSpread(m.base);
  const auto [cap, first] = CapsOf(req.base, schema);
  const std::vector<size_t> given = model.Buckets(cap, first).ends;
  for (const auto& [i, r] : results) {
    const double c_cap = t.candidates(i).bucket_cap_mb();
    if (model.Buckets(c_cap, ddp::FirstCapMiB(c_cap)).ends != given) continue;
    *t.mutable_base_step_ms() = t.candidates(i).measured_step_ms();
    t.set_base_same_as(c_cap);
  }
  t.set_gain(t.base_step_ms().median() / c.measured_step_ms().median() - 1);
  t.set_gain_noise(HalfWidth(t.base_step_ms()) + HalfWidth(c.measured_step_ms()));
  // Where the chosen makes the experiment's own buckets, or is no faster beyond the noise,
  // the answer is the experiment's own cap: the text, the file and the code say the same.
  const bool keep = (t.base_same_as() == c.bucket_cap_mb() && t.base_same_as() > 0) || t.gain() <= t.gain_noise();
  return WriteAnswer(req, schema, runner, keep ? cap : c.bucket_cap_mb(), t);
}

// Nothing to tune: every cap makes the buckets the experiment as given makes. The answer
// is its own cap, unverified (its run is the measurement); nothing else runs.
absl::Status NothingToTune(const TuneRequest& req, Runner& runner, const Measurements& m, const Model& model,
                           v1::Tuning& t) {
  const auto [cap, first] = CapsOf(req.base, runner.schema());
  t.set_nothing_to_tune(true);
  t.set_chosen_experiment(m.base.experiment());
  *t.mutable_base_step_ms() = StepSpread(m.base);
  absl::StatusOr<double> predicted = model.StepMs(cap, first);
  if (!predicted.ok()) return predicted.status();
  t.set_base_predicted_step_ms(*predicted);
  return WriteAnswer(req, runner.schema(), runner, cap, t);
}

// Whether every candidate makes the experiment's own buckets.
bool EveryCapMakesTheGivenBuckets(const TuneRequest& req, const ExperimentSchema& schema, const Model& model,
                                  const v1::Tuning& t) {
  const auto [cap, first] = CapsOf(req.base, schema);
  const std::vector<size_t> given = model.Buckets(cap, first).ends;
  for (const v1::TuneCandidate& c : t.candidates()) {
    if (model.Buckets(c.bucket_cap_mb(), ddp::FirstCapMiB(c.bucket_cap_mb())).ends != given) return false;
  }
  return true;
}

// The verdict on the answer's buckets, whose predicted step is the table's; disputed
// where the answer's runs waited for communication far longer than the model's whole
// communication cost (#64: a verdict against its own measurements).
absl::Status JudgeAnswer(const TuneRequest& req, const ExperimentSchema& schema, const Model& model,
                         const Measurements& m, v1::Tuning& t) {
  const auto [cap, first] = CapsOf(req.base, schema);
  const double chosen = t.chosen_cap_mb();
  VerdictOptions options;
  options.buckets = chosen == cap ? model.Buckets(cap, first) : model.Buckets(chosen, ddp::FirstCapMiB(chosen));
  options.buckets_name = absl::StrFormat("bucket_cap_mb %g", chosen);
  options.other_ms = model.other_ms;
  absl::StatusOr<Verdict> verdict = Judge(model.in, model.curve, model.levers, options);
  if (!verdict.ok()) return verdict.status();
  t.set_bound(std::string(BoundednessName(verdict->bound)));
  t.set_compression_can_pay(verdict->compression_can_pay);
  t.set_verdict(verdict->sentence);
  double exposed = m.base.exposed_comm_ms();  // the answer's own runs, where it has them
  for (const v1::TuneCandidate& c : t.candidates()) {
    if (c.bucket_cap_mb() == chosen && c.measured_step_ms().count() > 0) exposed = c.measured_exposed_ms();
  }
  if (exposed > 2 * verdict->overhead_ms + 1) {
    t.set_verdict_disputed(true);
    t.set_verdict(absl::StrFormat(
        "%s The runs disagree: after backward they waited %.1f ms a step for communication (measured), where the "
        "model puts the whole cost of communication at %.1f ms. Trust the measured steps over this verdict.",
        verdict->sentence, exposed, verdict->overhead_ms));
  }
  return absl::OkStatus();
}

// Every cap run as often as the verified ones: the sweep the tuner spares, to check it.
absl::Status Exhaustive(const TuneRequest& req, Runner& runner, v1::Tuning& t) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<int> all(t.candidates_size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  req.say(absl::StrCat("tune: the exhaustive sweep, to check the answer: ", all.size(), " caps, ",
                       req.settings.repetitions, " run(s) each"));
  absl::StatusOr<std::map<int, v1::RunResult>> results = RunCandidates(req, runner, all, "_sweep", t);
  if (!results.ok()) return results.status();
  t.set_exhaustive_seconds(Seconds(start));
  double best_ms = 0, chosen_ms = 0;
  for (const auto& [i, r] : *results) {
    const double ms = StepSpread(r).median();
    if (best_ms == 0 || ms < best_ms) {
      best_ms = ms;
      t.set_exhaustive_best_cap_mb(t.candidates(i).bucket_cap_mb());
    }
    if (t.candidates(i).bucket_cap_mb() == t.chosen_cap_mb()) chosen_ms = ms;
  }
  if (chosen_ms > 0) t.set_vs_exhaustive_best(best_ms / chosen_ms);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::Tuning> Tune(const TuneRequest& req, Runner& runner) {
  const auto start = std::chrono::steady_clock::now();
  v1::Tuning t;
  t.set_experiment(req.base.name());
  if (req.settings.caps_mib.empty()) return absl::InvalidArgumentError("no bucket_cap_mb to choose among");
  if (absl::Status s = CanSetCaps(runner.schema()); !s.ok()) return s;
  if (absl::Status s = runner.Check(WithCap(req.base, req.settings.caps_mib[0], req.base.name(), runner.schema()));
      !s.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("--tune chooses bucket_cap_mb, and ", req.base.name(),
                                                      " cannot take one: ", s.message()));
  }
  if (HasPlugin(req.base, kNoCommunication)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--tune chooses how gradients are grouped for their exchange, and ", req.base.name(),
        " exchanges none (plugin no_communication, a diagnostic): tune the experiment without it"));
  }
  std::vector<std::string> left_out;
  const v1::Experiment probe = MakeProbe(req.base, runner, left_out);
  if (absl::Status s = runner.Check(probe); !s.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("the tuner's probe of ", req.base.name(), " cannot run: ", s.message()));
  }
  for (const std::string& plugin : left_out) req.say(absl::StrCat("tune: the probe runs without ", plugin));
  absl::StatusOr<Measurements> m = Measure(req, runner, probe);
  if (!m.ok()) return m.status();
  t.set_cached(m->cached);
  t.set_cache_path(req.cache_path);
  t.set_cache_note(m->note);
  absl::StatusOr<Model> model = MakeModel(*m, req.base, runner.schema());
  if (!model.ok()) return model.status();
  t.set_slowdown(model->levers.overlap_slowdown);
  t.set_collective_overhead_us(model->overhead_us);
  if (absl::Status s = PredictCaps(*model, req.settings, t); !s.ok()) return s;
  if (EveryCapMakesTheGivenBuckets(req, runner.schema(), *model, t)) {
    req.say("tune: every bucket_cap_mb makes the experiment's own buckets: nothing to verify");
    if (absl::Status s = NothingToTune(req, runner, *m, *model, t); !s.ok()) return s;
  } else {
    absl::StatusOr<std::map<int, v1::RunResult>> verified = Verify(req, runner, t);
    if (!verified.ok()) return verified.status();
    if (absl::Status s = Answer(req, runner.schema(), runner, *m, *model, *verified, t); !s.ok()) return s;
  }
  if (absl::Status s = JudgeAnswer(req, runner.schema(), *model, *m, t); !s.ok()) return s;
  absl::StatusOr<std::optional<v1::Experiment>> levers = TryLosslessLevers(req, runner, t);
  if (!levers.ok()) return levers.status();
  if (*levers) {
    TuneRequest with_levers = req;
    with_levers.base = **levers;
    if (absl::Status s = WriteAnswer(with_levers, runner.schema(), runner, t.chosen_cap_mb(), t); !s.ok()) return s;
  }
  t.set_tuning_seconds(Seconds(start));
  if (req.settings.exhaustive && !t.nothing_to_tune()) {
    if (absl::Status s = Exhaustive(req, runner, t); !s.ok()) return s;
  }
  t.set_text(TuningText(t));
  return t;
}

std::set<std::string> TunerPlugins() { return {kBucketSizing, kNoCommunication, kShardedOptimizer, kStepGraph}; }

std::string CapRunName(const std::string& base, double cap, const std::string& infix) {
  return absl::StrCat(base, infix, "_", absl::StrReplaceAll(absl::StrCat(cap), {{".", "p"}}), "mb");
}

}  // namespace ddplab::tune
