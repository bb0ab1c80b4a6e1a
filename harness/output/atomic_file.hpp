// Report files appear whole or not at all: a reader (a Slurm epilog, a CI step) never sees a
// half-written JSON file, even when a rank dies mid-write.
#pragma once

#include <string>
#include <vector>

namespace moebench {

// Writes `content` to a temporary file "<path>.tmp.<host>.<pid>.XXXXXX" in the same directory,
// fsyncs it and renames it over `path`. The temporary file's name ends in six random characters
// and it is created exclusively (mkostemp: O_CREAT | O_EXCL, which never follows a link planted
// at its name), checked to be a regular file with fstat, and made readable (0644 less the umask);
// rename() replaces whatever `path` is then, a link or a FIFO planted there included, without
// writing through it. On failure the temporary file is removed and a RuntimeError names the
// path and cause.
void write_file_atomically(const std::string& path, const std::string& content);

// Where a report went: `path` as asked, or a fallback and why the path was not written.
struct WrittenFile {
  std::string path;
  std::string failure;  // "" when written where asked
};
// Writes `content` to `path` as write_file_atomically does; where that fails (a full disk, a
// directory removed since the check), to the first of `fallback_dirs` that takes it, as
// "<stem>-rescued-<pid>.json" there, so that a run's measurements are never lost to their
// destination. RuntimeError naming every place tried when none takes it.
WrittenFile write_file_or_elsewhere(const std::string& path, const std::string& content,
                                    const std::vector<std::string>& fallback_dirs);

// A private temporary copy of `content` beside `near` ("<near>.XXXXXX", created as above), for a
// helper that reads a file by name (the plots); returns its path, which the caller removes.
std::string write_temporary_file(const std::string& near, const std::string& content);

// Checked before a run so a bad destination fails in a second, not after the benchmark: throws
// UsageError ("<flag> <path>: directory <dir> does not exist") when the directory is missing,
// not a directory or not writable; when `path` exists and is not a regular file (a directory, a
// symlink, a device such as /dev/full, a FIFO: moebench replaces only regular files, and a
// symlink is refused rather than followed or replaced); or when the directory's file system has
// less than kMinFreeBytes free. Removes this host's temporary files of `path` whose process is
// gone (a writer killed mid-write), and returns how many.
// `in_place`: the file is written where it is (a step log), not through a temporary name: the
// name itself is probed (created and removed where it does not exist yet) instead of the
// temporary's.
int ensure_writable_destination(const std::string& path, const std::string& flag = "--out",
                                bool in_place = false);

// The free space a destination needs: a report of a 1,024-GPU run is about 120 kB.
constexpr long long kMinFreeBytes = 4LL << 20;

}  // namespace moebench
