// Files moebench reads and streams as regular files only: a FIFO, device or socket planted at a
// path never blocks a run, `report` or `validate` (each is opened with O_NONBLOCK and checked with
// fstat), and a file moebench writes in place is never written through a symbolic link
// (O_NOFOLLOW). Whole outputs are written by write_file_atomically (harness/output).
#pragma once

#include <cstdio>
#include <string>

namespace moebench {

// The most a file read whole may hold: a run report of thousands of ranks is a few MB, a link
// test's pair matrix at 1,024 GPUs tens of MB. Small inputs (a system description, a model config)
// pass a smaller bound.
inline constexpr long long kMaxInputBytes = 256LL << 20;
inline constexpr long long kMaxSmallInputBytes = 1LL << 20;

// The whole content of `path`: UsageError "<path>: <why>; <hint>" when it cannot be opened, is
// not a regular file (a directory, FIFO, device or socket), holds more than max_bytes or cannot be
// read. A link is followed: it is an input its owner named.
std::string read_regular_file(const std::string& path, const std::string& hint,
                              long long max_bytes = kMaxInputBytes);

// `path` created or truncated for writing, as a stream: UsageError "<flag> <path>: <why>" when
// it is a symbolic link, a FIFO, a device or anything but a regular file, without blocking on it.
std::FILE* open_regular_for_writing(const std::string& path, const std::string& flag);

}  // namespace moebench
