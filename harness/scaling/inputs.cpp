#include "harness/scaling/inputs.hpp"

#include <glob.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "harness/core/error.hpp"
#include "harness/core/json_excerpt.hpp"
#include "harness/core/regular_file.hpp"
#include "harness/output/run_report.hpp"
#include "harness/scaling/sha256.hpp"

namespace moebench {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool has_glob_characters(const std::string& s) {
  return s.find_first_of("*?[") != std::string::npos;
}

std::vector<std::string> glob_matches(const std::string& pattern) {
  glob_t g{};
  std::vector<std::string> out;
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
    out.assign(g.gl_pathv, g.gl_pathv + g.gl_pathc);  // glob(3) sorts them
  }
  ::globfree(&g);
  return out;
}

// nlohmann's messages start with "[json.exception.parse_error.101] "; the rest is the point.
std::string parse_message(const json::parse_error& e) {
  std::string what = e.what();
  const auto close = what.find("] ");
  return close == std::string::npos ? what : what.substr(close + 2);
}

// "/config/model/hidden_size" -> "config.model.hidden_size"
std::string dotted(std::string pointer) {
  if (!pointer.empty() && pointer.front() == '/') pointer.erase(0, 1);
  std::replace(pointer.begin(), pointer.end(), '/', '.');
  return pointer;
}

void add_key(std::vector<FieldValue>& key, const json& doc, const std::string& pointer) {
  const json::json_pointer ptr(pointer);
  key.emplace_back(dotted(pointer), doc.contains(ptr) ? doc.at(ptr).dump() : "(absent)");
}

std::vector<FieldValue> workload_key(const json& doc) {
  std::vector<FieldValue> key;
  // nlohmann's json keeps object keys sorted, so the model's fields come in a stable order.
  for (const auto& [name, value] : doc.at("config").at("model").items()) {
    key.emplace_back("config.model." + name, value.dump());
  }
  for (const char* p : {"/config/workload/layers",
                        "/config/workload/dense_layers",
                        "/config/workload/moe_layers",
                        "/config/workload/attention",
                        "/config/workload/head",
                        "/config/workload/mtp_layers",
                        "/config/workload/routing",
                        "/config/workload/seq_len",
                        "/config/workload/micro_batch",
                        "/config/precision",
                        "/config/overlap",
                        "/parallel/ep",
                        "/config/grad_reduce",
                        "/config/optimizer",
                        "/meta/backend",
                        "/meta/comm",
                        "/config/recipe/name",
                        "/parallel/pipeline/pp",
                        "/parallel/pipeline/vp",
                        "/parallel/pipeline/layout"}) {
    add_key(key, doc, p);
  }
  return key;
}

// Strings of meta that say which software ran; differences between runs become warnings. Any
// string key a later schema adds (driver or NCCL versions) is compared too.
std::vector<FieldValue> software_of(const json& doc) {
  std::vector<FieldValue> out;
  for (const auto& [name, value] : doc.at("meta").items()) {
    if (!value.is_string() || name == "start_time" || name == "backend" || name == "comm") continue;
    out.emplace_back("meta." + name, value.get<std::string>());
  }
  out.emplace_back("config.blas_threads", doc.at("config").at("blas_threads").dump());
  // GPU runs list every rank's device: the distinct models, drivers and libraries of a run.
  if (const auto devices = doc["meta"].find("devices"); devices != doc["meta"].end()) {
    for (const char* key : {"name", "driver_version", "cuda_driver_version", "cuda_runtime_version",
                            "nccl_version"}) {
      std::set<std::string> values;
      for (const json& d : *devices) {
        if (d.contains(key) && d[key].is_string()) values.insert(d[key].get<std::string>());
      }
      std::string joined;
      for (const std::string& v : values) joined += (joined.empty() ? "" : " + ") + v;
      if (!joined.empty()) out.emplace_back(std::string("meta.devices[].") + key, joined);
    }
  }
  return out;
}

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw UsageError(path + ": " + what);
}

void check_kind_and_version(const std::string& path, const json& doc) {
  if (!doc.is_object()) {
    bad(path, std::string("top level is ") + doc.type_name() +
                  ", expected a moebench run report object (`moebench run --out`)");
  }
  if (!doc.contains("kind")) bad(path, "no /kind: not a moebench run report");
  if (doc["kind"] != kRunReportKind) {
    bad(path, "/kind is " + json_excerpt(doc["kind"]) + ", expected \"" + kRunReportKind +
                  "\": not a run report");
  }
  if (!doc.contains("schema_version") || !doc["schema_version"].is_number_integer()) {
    bad(path, "/schema_version is missing or not an integer: not a run report this moebench reads");
  }
  const auto version = doc["schema_version"].get<long long>();
  if (version > kRunSchemaVersion) {
    bad(path, "/schema_version is " + std::to_string(version) +
                  ", from a newer moebench: this one reads run reports of schema version " +
                  std::to_string(kRunSchemaVersion) + " (report with a newer moebench)");
  }
  if (version != kRunSchemaVersion) {
    bad(path, "/schema_version is " + std::to_string(version) +
                  ", not a version this moebench reads (" + std::to_string(kRunSchemaVersion) +
                  ")");
  }
}

}  // namespace

std::string canonical_path(const std::string& path) {
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(path, ec);
  return ec ? path : p.string();
}

const std::vector<std::string>& mixable_fields() {
  static const std::vector<std::string> fields = {"seq_len", "micro_batch", "ep"};
  return fields;
}

std::string mixable_field_path(const std::string& name) {
  return name == "ep" ? "parallel.ep" : "config.workload." + name;
}

namespace {
// Whether the file at `path` is a run report: one of the outputs, found in an input folder, may be
// a previous scaling report (skipped, and replaced by the new one) but never a run it would
// overwrite.
bool is_run_report(const std::string& path) {
  try {
    const json doc = json::parse(read_regular_file(path, "a run report"));
    return doc.is_object() && doc.value("kind", std::string()) == kRunReportKind;
  } catch (const std::exception&) {
    return false;  // not a readable JSON document: not a run this report would read
  }
}

std::vector<InputFile> expand_inputs_unchecked(const std::vector<std::string>& args,
                                               const std::vector<std::string>& skip) {
  if (args.empty())
    throw UsageError("no run reports given: pass RUN.json files, directories or globs");
  std::set<std::string> skipped;
  for (const std::string& s : skip) {
    if (!s.empty()) skipped.insert(canonical_path(s));
  }
  std::vector<InputFile> out;
  std::set<std::string> seen;
  auto add = [&](const std::string& path, bool from_directory, std::string key) {
    if (seen.insert(key).second) out.push_back({path, from_directory, std::move(key)});
  };
  for (const std::string& arg : args) {
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
      std::vector<std::pair<std::string, std::string>> files;  // path, canonical
      for (const auto& entry : fs::directory_iterator(arg, ec)) {
        if (entry.path().extension() != ".json" || !entry.is_regular_file()) continue;
        std::string key = canonical_path(entry.path().string());
        if (skipped.contains(key) && is_run_report(entry.path().string())) {
          throw UsageError(entry.path().string() +
                           ": is a run report in an input folder and an output of this report, "
                           "which would overwrite it; write the report to another file");
        }
        if (!skipped.contains(key)) files.emplace_back(entry.path().string(), std::move(key));
      }
      if (ec) throw UsageError(arg + ": cannot list the directory: " + ec.message());
      if (files.empty()) throw UsageError(arg + ": directory holds no *.json run reports");
      std::sort(files.begin(), files.end());
      for (auto& [path, key] : files) add(path, true, std::move(key));
    } else if (fs::exists(arg, ec)) {
      add(arg, false, canonical_path(arg));
    } else if (has_glob_characters(arg)) {
      const std::vector<std::string> matches = glob_matches(arg);
      if (matches.empty()) throw UsageError(arg + ": no file matches this pattern");
      for (const std::string& m : matches) {
        if (!fs::is_directory(m, ec)) add(m, false, canonical_path(m));
      }
    } else {
      throw UsageError(arg + ": no such file or directory");
    }
  }
  return out;
}
}  // namespace

std::vector<InputFile> expand_inputs(const std::vector<std::string>& args,
                                     const std::vector<std::string>& skip) {
  try {
    return expand_inputs_unchecked(args, skip);
  } catch (const fs::filesystem_error& e) {
    // A symlink loop, a permission denied deep in a directory: bad input, not a crash.
    throw UsageError(e.path1().string() + ": " + e.code().message());
  }
}

namespace {

// Opened once, without blocking on a FIFO or device, and refused unless a regular file.
std::string read_file(const std::string& path) {
  return read_regular_file(path, "give moebench run report files");
}

json parse_document(const std::string& path, const std::string& bytes) {
  if (bytes.find_first_not_of(" \t\r\n") == std::string::npos) {
    bad(path, "empty file: not a run report");
  }
  try {
    return json::parse(bytes);
  } catch (const json::parse_error& e) {
    const std::string msg = parse_message(e);
    if (e.byte >= bytes.size() || msg.find("unexpected end of input") != std::string::npos) {
      bad(path, "truncated JSON (the text ends before the document does): " + msg);
    }
    bad(path, "not JSON: " + msg);
  } catch (const json::exception& e) {
    // A number beyond double's range (out_of_range.406: found by tests/fuzz/fuzz_report).
    std::string what = e.what();
    const auto pos = what.find("] ");
    if (pos != std::string::npos) what = what.substr(pos + 2);
    bad(path, "not JSON that moebench reads: " + what.substr(0, 200));
  }
}

// An integer field the schema typed, checked to fit int before it is narrowed (a value of 2^40
// would wrap).
int int_field(const std::string& path, const json& doc, const char* pointer) {
  const json& v = doc.at(json::json_pointer(pointer));
  const auto x = v.get<std::int64_t>();
  if (x < 0 || x > INT_MAX) {
    bad(path, std::string(pointer) + " is " + std::to_string(x) + ", outside 0.." +
                  std::to_string(INT_MAX));
  }
  return static_cast<int>(x);
}

// What no real run can report, whatever its figures say of each other: more steps than asked
// for, arrays longer than their counts, more per-rank entries than ranks, more ranks than its
// nodes could hold, a rate above any accelerator's.
void check_plausible(const std::string& path, const json& doc, const RunPoint& p) {
  const auto n = [](std::size_t v) { return std::to_string(v); };
  const int completed = int_field(path, doc, "/status/steps_completed");
  const int requested = int_field(path, doc, "/status/steps_requested");
  if (completed > requested) {
    bad(path, "/status/steps_completed " + n(completed) + " exceeds /status/steps_requested " +
                  n(requested) + ": the report was edited or damaged");
  }
  const json& results = doc["results"];
  const std::size_t times = results["step_times_s"].size();
  if (times != static_cast<std::size_t>(completed)) {
    bad(path, "/results/step_times_s has " + n(times) + " entries but /status/steps_completed is " +
                  n(completed) + ": the report was edited or damaged");
  }
  const json& count = results["step_time_s"]["count"];
  if (!count.is_number_integer() || count.get<std::int64_t>() != static_cast<std::int64_t>(times)) {
    bad(path, "/results/step_time_s/count " + json_excerpt(count, 40) + " is not the " + n(times) +
                  " entries of /results/step_times_s: the report was edited or damaged");
  }
  const std::size_t per_rank = results["per_rank"].size();
  const int reporting = int_field(path, doc, "/status/ranks_reporting");
  if (per_rank > static_cast<std::size_t>(p.gpus) || reporting > p.gpus) {
    bad(path, "/results/per_rank has " + n(per_rank) + " entries, /status/ranks_reporting is " +
                  n(reporting) + " and /parallel/world " + n(p.gpus) +
                  ": at most one entry per rank; the report was edited or damaged");
  }
  if (p.nodes < 1 || p.nodes > p.gpus ||
      static_cast<double>(p.gpus) > static_cast<double>(p.nodes) * kMaxRanksPerNode) {
    bad(path, "/parallel/world " + n(p.gpus) + " on /parallel/nodes " + n(p.nodes) +
                  ": a node holds between 1 and " + n(kMaxRanksPerNode) +
                  " ranks; the report was edited or damaged");
  }
  if (p.tflops_per_gpu > kMaxTflopsPerGpu) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.4g", p.tflops_per_gpu);
    bad(path, "/results/tflops_per_gpu " + std::string(buf) + " exceeds " +
                  n(static_cast<std::size_t>(kMaxTflopsPerGpu)) +
                  ", beyond any accelerator's dense peak at any precision (GB300's FP4 is 15,000): "
                  "the report was edited or damaged, or its step times are not real");
  }
}

RunPoint point_from_document(const std::string& path, const std::string& bytes, const json& doc,
                             const DocumentCheck& check) {
  check_kind_and_version(path, doc);
  const std::vector<std::string> errors = check(doc);
  if (!errors.empty()) {
    std::string line =
        "not a valid run report (" + std::string(kRunSchemaFile) + "): " + errors.front();
    if (errors.size() > 1) line += " (and " + std::to_string(errors.size() - 1) + " more)";
    bad(path, line);
  }

  RunPoint p;
  p.path = path;
  p.sha256 = sha256_hex(bytes);
  if (const json& st = doc["status"]; st["state"].get<std::string>() != "completed") {
    const std::string state = st["state"].get<std::string>();
    const std::string steps =
        " after " + std::to_string(int_field(path, doc, "/status/steps_completed")) + " of " +
        std::to_string(int_field(path, doc, "/status/steps_requested")) + " timed steps";
    if (state == "failed") {
      // The error as the run said it, cut short: it is one line of `report`'s message.
      const std::string error = st["error"].is_string() ? st["error"].get<std::string>() : "";
      p.interrupted = "stopped by a failure" + steps + " (" + json_excerpt(json(error), 120) +
                      "; its results are rank 0's own)";
    } else {
      p.interrupted = state + " by " +
                      (st["signal"].is_string() ? st["signal"].get<std::string>() : "a signal") +
                      steps;
    }
  }
  const json& meta = doc["meta"];
  const json& env = meta["environment"];
  if (env.contains("SLURM_JOB_ID")) p.job_id = env["SLURM_JOB_ID"].get<std::string>();
  p.hosts = meta["hosts"].get<std::vector<std::string>>();
  p.start_time = meta["start_time"].get<std::string>();
  p.tool_version = meta["tool_version"].get<std::string>();
  p.git_sha = meta["git_sha"].get<std::string>();
  p.synthetic = meta.value("synthetic", false);
  p.software = software_of(doc);
  // The fields that name the system, read leniently (the rest of a device is not needed here).
  std::vector<DeviceRecord> devices;
  if (const auto d = meta.find("devices"); d != meta.end() && d->is_array()) {
    const auto text = [](const json& x, const char* key) {
      return x.contains(key) && x[key].is_string() ? x[key].get<std::string>() : std::string();
    };
    for (const json& x : *d) {
      if (!x.is_object()) continue;
      DeviceRecord r;
      r.info.name = text(x, "name");
      r.info.runtime_version = text(x, "cuda_runtime_version");
      r.driver_version = text(x, "driver_version");
      r.nccl_version = text(x, "nccl_version");
      devices.push_back(r);
    }
  }
  p.system = system_name(devices, meta["backend"].get<std::string>(),
                         meta["mpi_library"].get<std::string>(), meta.value("blas", std::string()));
  p.workload_key = workload_key(doc);

  const json& config = doc["config"];
  const json& workload = config["workload"];
  p.model_name = config["model"]["name"].get<std::string>();
  p.seq_len = workload["seq_len"].get<std::int64_t>();
  p.micro_batch = workload["micro_batch"].get<std::int64_t>();
  p.steps = int_field(path, doc, "/config/steps");
  p.gpus = int_field(path, doc, "/parallel/world");
  p.nodes = int_field(path, doc, "/parallel/nodes");
  p.ranks_per_node = int_field(path, doc, "/parallel/ranks_per_node");
  p.ep = int_field(path, doc, "/parallel/ep");
  p.tokens_per_rank = workload["tokens_per_rank"].get<double>();
  p.global_tokens = p.tokens_per_rank * p.gpus;

  const json& results = doc["results"];
  p.step_time_s = results["step_time_s"]["median"].get<double>();
  p.tflops_per_gpu = results["tflops_per_gpu"].get<double>();
  p.tokens_per_s_per_gpu = results["tokens_per_s_per_gpu"].get<double>();
  p.compute_time_s = results["compute_time_s"].get<double>();
  p.communication_time_s = results["communication_time_s"].get<double>();
  p.exposed_communication_s = results["exposed_communication_s"].get<double>();
  const json& phases = results["phases"];
  for (std::size_t i = 0; i < kPhaseCount; ++i) {
    const std::string name(kPhaseNames[i]);
    if (!phases.contains(name)) continue;  // a phase the run did not have (no dense layer, say)
    p.phase_max_s[i] = phases[name]["time_s"]["median"].get<double>();
    p.busbw[i] = phases[name]["busbw"].get<double>();
  }
  p.phase_time_s = p.phase_max_s;
  if (results.contains("step_breakdown")) {
    const json& own = results["step_breakdown"]["phase_time_s"];
    for (std::size_t i = 0; i < kPhaseCount; ++i) {
      const std::string name(kPhaseNames[i]);
      p.phase_time_s[i] = own.contains(name) ? own[name].get<double>() : 0.0;
    }
  }
  if (!(p.step_time_s > 0) || !(p.tflops_per_gpu > 0)) {
    // A run that failed or was interrupted before its first timed step has nothing to compare,
    // even with --allow-failed.
    if (!p.interrupted.empty()) {
      bad(path, "the run " + p.interrupted + ": no timed step finished, nothing to compare");
    }
    bad(path,
        "/results/step_time_s/median and /results/tflops_per_gpu must be > 0 (no timed step)");
  }
  {
    // The figures must agree with each other, as the run computed them (a report edited by hand
    // or damaged would otherwise pass a claim): TFLOP/s per GPU = FLOPs per step / (median step
    // time x world), tokens/s per GPU = tokens per step / (median x world). 1e-6 relative: only
    // the printing of the doubles and the order of two divisions differ.
    const double median_world = p.step_time_s * p.gpus;
    const double flops = doc["accounting"]["instantiated"]["flops_per_step"].get<double>();
    const double tokens = workload["tokens_per_step"].get<double>();
    const auto agrees = [](double got, double want) {
      return std::isfinite(got) && std::abs(got - want) <= 1e-6 * std::abs(want);
    };
    const auto number = [](double v) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.6g", v);
      return std::string(buf);
    };
    const double want_tflops = flops / median_world / 1e12;
    if (!agrees(p.tflops_per_gpu, want_tflops)) {
      bad(path, "/results/tflops_per_gpu " + number(p.tflops_per_gpu) +
                    " disagrees with /accounting/instantiated/flops_per_step / (median step "
                    "time x world) = " +
                    number(want_tflops) + ": the report was edited or damaged");
    }
    const double want_tokens = tokens / median_world;
    if (!agrees(p.tokens_per_s_per_gpu, want_tokens)) {
      bad(path, "/results/tokens_per_s_per_gpu " + number(p.tokens_per_s_per_gpu) +
                    " disagrees with /config/workload/tokens_per_step / (median step time x "
                    "world) = " +
                    number(want_tokens) + ": the report was edited or damaged");
    }
  }
  // Figures that agree with one another may still be impossible.
  check_plausible(path, doc, p);

  if (config.contains("recipe")) {
    const json& r = config["recipe"];
    p.recipe = r["name"].get<std::string>();
    const json& t = r["published"]["tflops_per_gpu"];
    if (!t.is_null()) p.recipe_tflops_per_gpu = t.get<double>();
    p.recipe_gpus = int_field(path, doc, "/config/recipe/published/gpus");
    p.recipe_differences = r["differences"].get<std::vector<std::string>>();
  }

  const json& v = doc["verification"];
  p.verification_enabled = v["enabled"].get<bool>();
  p.verification_passed = v["passed"].get<bool>();
  p.mismatches = v["mismatches"].get<long long>();

  // What may make the figures not the system's: slow ranks the run itself named, a fault it
  // injected, FP8 it only emulated.
  // Read leniently, as the devices are: the schema said what it could, and a damaged entry
  // still names what it can.
  const auto field = [](const json& o, const char* key) -> const json* {
    return o.is_object() && o.contains(key) ? &o[key] : nullptr;
  };
  const json* health = field(doc, "health");
  const json* suspects = health != nullptr ? field(*health, "suspects") : nullptr;
  if (suspects != nullptr && suspects->is_array()) {
    for (const json& s : *suspects) {
      const json* rank = field(s, "rank");
      const json* host = field(s, "host");
      const json* metric = field(s, "metric");
      const json* slowdown = field(s, "slowdown");
      std::ostringstream line;
      line << std::setprecision(3) << "rank "
           << (rank != nullptr && rank->is_number_integer() ? std::to_string(rank->get<long long>())
                                                            : std::string("?"))
           << " on " << (host != nullptr && host->is_string() ? host->get<std::string>() : "?");
      if (metric != nullptr && metric->is_string() && slowdown != nullptr &&
          slowdown->is_number()) {
        line << " (" << metric->get<std::string>() << " " << slowdown->get<double>()
             << "x the median)";
      }
      p.suspects.push_back(line.str());
    }
  }
  if (const json* inject = field(config, "inject"); inject != nullptr) {
    p.injected = inject->is_string() ? inject->get<std::string>() : inject->dump();
  }
  const json* fp8 = field(config, "fp8");
  const json* emulated = fp8 != nullptr ? field(*fp8, "emulated") : nullptr;
  p.fp8_emulated = emulated != nullptr && emulated->is_boolean() && emulated->get<bool>();
  return p;
}

}  // namespace

RunPoint parse_run_report(const std::string& path, const std::string& bytes,
                          const DocumentCheck& check) {
  return point_from_document(path, bytes, parse_document(path, bytes), check);
}

std::vector<RunPoint> read_run_reports(const std::vector<InputFile>& files,
                                       const DocumentCheck& check,
                                       std::vector<std::string>* skipped) {
  // Parsing and validating dominate (thousands of reports of large runs): the files are spread
  // over threads, and the results and the first error are taken in argument order, so the output
  // and the message do not depend on the thread count.
  struct Slot {
    std::optional<RunPoint> point;
    std::string skipped;
    std::exception_ptr error;
  };
  std::vector<Slot> slots(files.size());
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i = next++; i < files.size(); i = next++) {
      try {
        const InputFile& f = files[i];
        const std::string bytes = read_file(f.path);
        const json doc = parse_document(f.path, bytes);
        // A directory of runs may also hold this command's earlier outputs; those are not inputs.
        if (f.from_directory && doc.is_object() && doc.contains("kind") &&
            doc["kind"] != kRunReportKind) {
          slots[i].skipped = f.path + " (kind " + json_excerpt(doc["kind"]) + ")";
          continue;
        }
        slots[i].point = point_from_document(f.path, bytes, doc, check);
      } catch (...) {
        slots[i].error = std::current_exception();
      }
    }
  };
  const std::size_t threads =
      std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 1 + files.size() / 16);
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();

  std::vector<RunPoint> points;
  points.reserve(files.size());
  for (Slot& slot : slots) {
    if (slot.error) std::rethrow_exception(slot.error);
    if (!slot.skipped.empty()) {
      if (skipped) skipped->push_back(slot.skipped);
      continue;
    }
    points.push_back(std::move(*slot.point));
  }
  return points;
}

}  // namespace moebench
