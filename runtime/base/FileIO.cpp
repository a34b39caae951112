//===- FileIO.cpp - reading and writing user files without surprises ------===//

#include "runtime/base/FileIO.h"

#include "runtime/base/Hash.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace mfrt;

namespace {

std::string quoted(const std::string &what, const std::string &path) {
  return what + " '" + path + "'";
}

/// What a non-regular file is, for messages.
const char *kindOf(mode_t mode) {
  if (S_ISDIR(mode)) {
    return "a directory";
  }
  if (S_ISCHR(mode) || S_ISBLK(mode)) {
    return "a device";
  }
  if (S_ISFIFO(mode)) {
    return "a FIFO";
  }
  if (S_ISSOCK(mode)) {
    return "a socket";
  }
  return "not a regular file";
}

/// The file a write to `path` replaces: `path` itself, or for a symlink the
/// file it names (the link stays a link).
StatusOr<std::string> resolveTarget(const std::string &path,
                                    const std::string &what) {
  struct stat link;
  if (lstat(path.c_str(), &link) != 0 || !S_ISLNK(link.st_mode)) {
    return path;
  }
  char resolved[PATH_MAX];
  if (!realpath(path.c_str(), resolved)) {
    return Status::error(codeOfErrno(errno),
                         "cannot write " + quoted(what, path) +
                             ": it is a symbolic link to a missing file (" +
                             std::strerror(errno) +
                             "); remove the link or "
                             "create its target");
  }
  return std::string(resolved);
}

std::string directoryOf(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) {
    return ".";
  }
  return slash == 0 ? "/" : path.substr(0, slash);
}

/// Removes the temporaries of `name` in `directory` (".name.XXXXXX.tmp")
/// that no writer holds locked and that are over a minute old: left by a
/// writer killed mid-write (kill -9 of a checkpoint save), which no later
/// run would otherwise remove. (A writer locks its temporary just after
/// creating it: the age keeps that instant's temporary safe.)
void removeAbandonedTemporaries(const std::string &directory,
                                const std::string &name,
                                const std::string &own) {
  DIR *dir = opendir(directory.c_str());
  if (!dir) {
    return;
  }
  std::string prefix = "." + name + ".";
  while (dirent *entry = readdir(dir)) {
    std::string file = entry->d_name;
    if (file.size() != prefix.size() + 10 ||
        file.compare(0, prefix.size(), prefix) != 0 ||
        file.compare(file.size() - 4, 4, ".tmp") != 0) {
      continue;
    }
    std::string path = directory + "/" + file;
    if (path == own) {
      continue;
    }
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
      continue;
    }
    struct stat info;
    if (fstat(fd, &info) == 0 && S_ISREG(info.st_mode) &&
        info.st_mtime < std::time(nullptr) - 60 &&
        flock(fd, LOCK_EX | LOCK_NB) == 0) {
      ::unlink(path.c_str());
    }
    ::close(fd);
  }
  closedir(dir);
}

/// A character device is written as it is (it cannot be replaced).
Status writeDevice(const std::string &path, const std::string &what,
                   const std::function<Status(FileWriter &)> &produce) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    return Status::error(codeOfErrno(errno), "cannot write " +
                                                 quoted(what, path) + ": " +
                                                 std::strerror(errno));
  }
  FileWriter writer(fd);
  Status produced = produce(writer);
  int closed = ::close(fd);
  int error = errno;
  if (!produced) {
    return produced;
  }
  if (writer.failed() || closed != 0) {
    int failure = writer.failed() ? writer.error() : error;
    return Status::error(codeOfErrno(failure), "cannot write " +
                                                   quoted(what, path) + ": " +
                                                   std::strerror(failure));
  }
  return Status::ok();
}

} // namespace

uint64_t mfrt::fileFingerprint(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return 0;
  }
  struct stat info;
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return 0;
  }
  constexpr off_t kSample = 1 << 20;
  uint64_t size = static_cast<uint64_t>(info.st_size);
  uint64_t hash = fnv1a64(&size, sizeof size);
  std::vector<char> buffer(kSample);
  for (off_t at : {off_t(0), std::max<off_t>(0, info.st_size - kSample)}) {
    ssize_t got = pread(fd, buffer.data(), buffer.size(), at);
    if (got > 0) {
      hash = hash * 0x9e3779b97f4a7c15ull +
             fnv1a64(buffer.data(), static_cast<size_t>(got));
    }
  }
  ::close(fd);
  return hash;
}

StatusOr<std::vector<uint8_t>> mfrt::readRegularFile(const std::string &path,
                                                     const std::string &what,
                                                     uint64_t maxBytes) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer before
  // the check below can refuse it (a regular file reads as without it).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return Status::error(codeOfErrno(errno), "cannot open " +
                                                 quoted(what, path) + ": " +
                                                 std::strerror(errno));
  }
  struct stat info;
  if (fstat(fd, &info) != 0) {
    int error = errno;
    ::close(fd);
    return Status::error(codeOfErrno(error), "cannot read " +
                                                 quoted(what, path) + ": " +
                                                 std::strerror(error));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    return Status::error(StatusCode::FailedPrecondition,
                         "cannot read " + quoted(what, path) + ": it is " +
                             kindOf(info.st_mode) + ", not a file");
  }
  uint64_t size = static_cast<uint64_t>(info.st_size);
  if (size > maxBytes) {
    ::close(fd);
    return Status::error(StatusCode::ResourceExhausted,
                         quoted(what, path) + " is " + std::to_string(size) +
                             " bytes; files of this kind are at most " +
                             std::to_string(maxBytes) + " bytes here");
  }
  std::vector<uint8_t> bytes;
  try {
    bytes.resize(size);
  } catch (const std::bad_alloc &) {
    ::close(fd);
    return Status::error(StatusCode::ResourceExhausted,
                         "out of memory reading " + quoted(what, path) + " (" +
                             std::to_string(size) + " bytes)");
  }
  size_t done = 0;
  while (done < size) {
    ssize_t got = ::read(fd, bytes.data() + done, size - done);
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got < 0) {
      int error = errno;
      ::close(fd);
      return Status::error(codeOfErrno(error), "cannot read " +
                                                   quoted(what, path) + ": " +
                                                   std::strerror(error));
    }
    if (got == 0) {
      break; // shorter than fstat said: it shrank while read
    }
    done += static_cast<size_t>(got);
  }
  ::close(fd);
  if (done != size) {
    return Status::error(
        StatusCode::DataLoss,
        quoted(what, path) + " became shorter while it was read (" +
            std::to_string(done) + " of " + std::to_string(size) +
            " bytes); read it again once it is complete");
  }
  return bytes;
}

Status mfrt::checkWritableTarget(const std::string &path,
                                 const std::string &what) {
  if (path.empty()) {
    return Status::error(StatusCode::InvalidArgument,
                         "the " + what + " path is empty");
  }
  StatusOr<std::string> target = resolveTarget(path, what);
  if (!target) {
    return target.status();
  }
  struct stat info;
  if (stat(target->c_str(), &info) == 0) {
    if (S_ISCHR(info.st_mode)) {
      if (access(target->c_str(), W_OK) != 0) {
        return Status::error(codeOfErrno(errno), "cannot write " +
                                                     quoted(what, path) + ": " +
                                                     std::strerror(errno));
      }
      return Status::ok();
    }
    if (!S_ISREG(info.st_mode)) {
      return Status::error(StatusCode::FailedPrecondition,
                           "cannot write " + quoted(what, path) + ": it is " +
                               kindOf(info.st_mode) +
                               "; give the path of a file to write");
    }
  } else if (errno != ENOENT) {
    return Status::error(codeOfErrno(errno), "cannot write " +
                                                 quoted(what, path) + ": " +
                                                 std::strerror(errno));
  }
  std::string directory = directoryOf(*target);
  if (stat(directory.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    return Status::error(StatusCode::NotFound,
                         "cannot write " + quoted(what, path) +
                             ": the directory '" + directory +
                             "' does not exist; create it first");
  }
  if (access(directory.c_str(), W_OK) != 0) {
    return Status::error(
        codeOfErrno(errno),
        "cannot write " + quoted(what, path) + ": the directory '" + directory +
            "' is not writable (" + std::strerror(errno) + ")");
  }
  return Status::ok();
}

void FileWriter::write(const void *data, size_t size) {
  const char *bytes = static_cast<const char *>(data);
  while (error_ == 0 && size > 0) {
    ssize_t written = ::write(fd_, bytes, size);
    if (written < 0) {
      if (errno != EINTR) {
        error_ = errno;
      }
      continue;
    }
    bytes += written;
    size -= static_cast<size_t>(written);
  }
}

Status
mfrt::writeFileAtomically(const std::string &path, const std::string &what,
                          const std::function<Status(FileWriter &)> &produce) {
  MFRT_RETURN_IF_ERROR(checkWritableTarget(path, what));
  StatusOr<std::string> target = resolveTarget(path, what);
  if (!target) {
    return target.status();
  }
  struct stat existing;
  if (stat(target->c_str(), &existing) == 0 && S_ISCHR(existing.st_mode)) {
    return writeDevice(*target, what, produce);
  }
  // A unique name in the target's directory (rename is atomic only within
  // one file system): concurrent writers never share a temporary.
  std::string directory = directoryOf(*target);
  std::string temporary =
      directory + "/." + target->substr(target->rfind('/') + 1) + ".XXXXXX.tmp";
  int fd = mkstemps(temporary.data(), 4);
  if (fd < 0) {
    return Status::error(codeOfErrno(errno),
                         "cannot write " + quoted(what, path) +
                             ": cannot create a temporary file in '" +
                             directory + "': " + std::strerror(errno));
  }
  // Held while writing: a temporary nobody holds is a killed writer's.
  flock(fd, LOCK_EX);
  removeAbandonedTemporaries(directory, target->substr(target->rfind('/') + 1),
                             temporary);
  auto fail = [&](const std::string &reason) {
    ::close(fd);
    ::unlink(temporary.c_str());
    return Status::error(StatusCode::Unavailable,
                         "cannot write " + quoted(what, path) + ": " + reason +
                             " (nothing was changed)");
  };
  // The mode a new file gets (mkstemp makes 0600), or the old file's.
  struct stat old;
  mode_t mode;
  if (stat(target->c_str(), &old) == 0) {
    mode = old.st_mode & 07777;
  } else {
    mode_t mask = umask(0);
    umask(mask);
    mode = 0666 & ~mask;
  }
  if (fchmod(fd, mode) != 0) {
    return fail(std::strerror(errno));
  }
  FileWriter writer(fd);
  Status produced = produce(writer);
  if (!produced) {
    ::close(fd);
    ::unlink(temporary.c_str());
    return produced;
  }
  if (writer.failed()) {
    return fail(std::strerror(writer.error()));
  }
  // Durable before it replaces the old file: a crash after the rename never
  // leaves an empty file in its place.
  if (fsync(fd) != 0) {
    return fail(std::strerror(errno));
  }
  // Renamed while still locked (closing unlocks: another writer would take
  // the temporary for a killed writer's).
  if (std::rename(temporary.c_str(), target->c_str()) != 0) {
    int error = errno;
    ::close(fd);
    ::unlink(temporary.c_str());
    return Status::error(codeOfErrno(error),
                         "cannot write " + quoted(what, path) +
                             ": cannot rename the temporary file over it: " +
                             std::strerror(error) + " (nothing was changed)");
  }
  if (::close(fd) != 0) { // the data is durable already (fsync)
    return Status::error(codeOfErrno(errno),
                         "wrote " + quoted(what, path) +
                             " but closing it failed: " + std::strerror(errno));
  }
  return Status::ok();
}
