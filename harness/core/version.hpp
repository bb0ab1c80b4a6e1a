// Version and provenance of this build (the git state is taken when the binary is built).
#pragma once

namespace moebench {

constexpr const char* kToolVersion = MOEBENCH_VERSION;
const char* git_sha();
bool git_dirty();

}  // namespace moebench
