#include "harness/output/system_name.hpp"

#include <set>
#include <vector>

namespace moebench {

namespace {

// The distinct values of `field` over the devices, joined by " + "; empty when none.
template <typename Field>
std::string distinct(const std::vector<DeviceRecord>& devices, Field field) {
  std::set<std::string> values;
  for (const DeviceRecord& d : devices) {
    const std::string v = field(d);
    if (!v.empty()) values.insert(v);
  }
  std::string out;
  for (const std::string& v : values) out += (out.empty() ? "" : " + ") + v;
  return out;
}

// "Open MPI v4.1.4" of "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, ...".
std::string short_library(const std::string& s) {
  return s.substr(0, s.find(','));
}

}  // namespace

SystemName system_name(const std::vector<DeviceRecord>& devices, const std::string& backend,
                       const std::string& mpi_library, const std::string& blas) {
  SystemName s;
  const std::string models = distinct(devices, [](const DeviceRecord& d) { return d.info.name; });
  s.gpu = !models.empty();
  s.accelerator = s.gpu ? models : backend.empty() ? "cpu" : backend;
  std::vector<std::string> parts;
  const auto add = [&](const std::string& label, const std::string& value) {
    if (!value.empty()) parts.push_back(label + value);
  };
  if (s.gpu) {
    add("driver ", distinct(devices, [](const DeviceRecord& d) { return d.driver_version; }));
    add("CUDA ", distinct(devices, [](const DeviceRecord& d) { return d.info.runtime_version; }));
    add("NCCL ", distinct(devices, [](const DeviceRecord& d) { return d.nccl_version; }));
  }
  add("", short_library(mpi_library));
  if (!s.gpu) {
    // "OpenBLAS 0.3.21" of "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ...": the name and version.
    const std::size_t first = blas.find(' ');
    add("", first == std::string::npos ? blas : blas.substr(0, blas.find(' ', first + 1)));
  }
  for (const std::string& p : parts) s.software += (s.software.empty() ? "" : ", ") + p;
  return s;
}

std::string describe_system(const SystemName& s, int ranks, int nodes) {
  const std::string where = " on " + std::to_string(nodes) + (nodes == 1 ? " node" : " nodes");
  const std::string software = s.software.empty() ? "" : " (" + s.software + ")";
  if (s.gpu) return std::to_string(ranks) + " x " + s.accelerator + where + software;
  return std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks") + where + ", " + s.accelerator +
         " backend, no GPU" + software;
}

}  // namespace moebench
