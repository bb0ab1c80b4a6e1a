#include "harness/comm/communicator.hpp"

namespace moebench {

const char* group_name(Group g) {
  switch (g) {
    case Group::world:
      return "world";
    case Group::expert:
      return "expert";
    case Group::expert_data:
      return "expert_data";
  }
  return "?";
}

}  // namespace moebench
